"""Gives a converted tiny text GGUF the exact tokenizer of a real model's GGUF.

usage: python gguf_vocab.py DONOR.gguf IN.gguf OUT.gguf HF_DIR

transformers rebuilds a GGUF tokenizer only approximately (SmolLM2's byte-level BPE comes back
in a shape llama.cpp's converter no longer recognizes), so the tokenizer.* keys of the donor
GGUF are copied verbatim instead. Tokens the tiny model adds beyond the donor's vocabulary
(SmolVLM's image tokens, read from HF_DIR/added_tokens.json) are appended as control tokens,
and the list is padded with unused "[PAD<id>]" entries up to the embedding's row count.
Everything else in IN.gguf (tensors, model keys) is kept as it is.
"""
import json
import sys
from pathlib import Path

from gguf import GGUFReader, GGUFValueType, GGUFWriter, TokenType


def field_value(f):
    return f.contents()


def main() -> None:
    donor, src, dst, hf_dir = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
    d = GGUFReader(donor)
    r = GGUFReader(src)
    arch = field_value(r.fields["general.architecture"])
    n_rows = int(next(t for t in r.tensors if t.name == "token_embd.weight").shape[1])

    tokens = list(field_value(d.fields["tokenizer.ggml.tokens"]))
    types = list(field_value(d.fields["tokenizer.ggml.token_type"]))
    added_file = hf_dir / "added_tokens.json"
    added = json.loads(added_file.read_text()) if added_file.is_file() else {}
    for text, idx in sorted(added.items(), key=lambda kv: kv[1]):
        if idx < len(tokens):
            if tokens[idx] != text:
                raise SystemExit(f"added token {text!r} at {idx} clashes with donor token {tokens[idx]!r}")
            continue
        if idx != len(tokens):
            raise SystemExit(f"added token {text!r} has id {idx}, expected {len(tokens)}")
        tokens.append(text)
        types.append(int(TokenType.CONTROL))
    while len(tokens) < n_rows:
        tokens.append(f"[PAD{len(tokens)}]")
        types.append(int(TokenType.UNUSED))
    if len(tokens) != n_rows:
        raise SystemExit(f"{len(tokens)} tokens for {n_rows} embedding rows")

    w = GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name.startswith("tokenizer.") or name == "general.architecture":
            continue
        if name.endswith(".vocab_size"):
            continue
        t = f.types[0]
        if t == GGUFValueType.ARRAY:
            w.add_key_value(name, field_value(f), t, sub_type=f.types[-1])
        else:
            w.add_key_value(name, field_value(f), t)
    w.add_vocab_size(n_rows)
    for name, f in d.fields.items():
        if not name.startswith("tokenizer."):
            continue
        if name == "tokenizer.ggml.tokens":
            w.add_token_list(tokens)
        elif name == "tokenizer.ggml.token_type":
            w.add_token_types(types)
        elif f.types[0] == GGUFValueType.ARRAY:
            w.add_key_value(name, field_value(f), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(name, field_value(f), f.types[0])
    for t in r.tensors:
        w.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for t in r.tensors:
        w.write_tensor_data(t.data, tensor_endianess=r.endianess)
    w.close()
    print(f"{dst}: {len(tokens)} tokens ({len(tokens) - len(field_value(d.fields['tokenizer.ggml.tokens']))} added)")


if __name__ == "__main__":
    main()
