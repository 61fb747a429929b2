"""Turns a llama.cpp GGUF decoder (llama, qwen2, gemma3) back into a Hugging Face folder, so
that `weft convert` can be tested on the models the repository ships: every tensor dequantized
(gguf-py) to F32 safetensors under its Hugging Face name, llama.cpp's conversion undone (the
llama q/k row permutation, Gemma's `w + 1` norms), `config.json`, `tokenizer.json` (BPE) or
`tokenizer.model` (Gemma's SentencePiece, written as protobuf by hand), `tokenizer_config.json`
with the chat template, all from the GGUF's own metadata.

usage: gguf_to_hf.py _ IN.gguf OUT_DIR [--shards N] [--dump TENSORS.json]
(the first argument is the unused base URL of tests/src/lib.rs's `python` helper.)
--dump writes, per GGUF tensor, the dequantized values' sha256 of their F32 bytes (after the
converter's transforms, i.e. what a faithful conversion back must reproduce), for the test.
"""

import hashlib
import json
import os
import struct
import sys

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType
from gguf.quants import dequantize
from safetensors.numpy import save_file

SMOLLM_PRE = {"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": True},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
QWEN2_PRE = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"},
     "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


def hf_name(arch, name):
    fixed = {"token_embd.weight": "model.embed_tokens.weight",
             "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
    if name in fixed:
        return fixed[name]
    _, layer, part, kind = name.split(".")
    common = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
              "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
              "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj",
              "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    gemma = {"post_attention_norm": "post_attention_layernorm",
             "ffn_norm": "pre_feedforward_layernorm",
             "post_ffw_norm": "post_feedforward_layernorm",
             "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}
    if arch == "gemma3" and part in gemma:
        hf = gemma[part]
    elif part == "ffn_norm":
        hf = "post_attention_layernorm"
    else:
        hf = common[part]
    return f"model.layers.{layer}.{hf}.{kind}"


def unpermute(w, n_head):
    rows = w.shape[0]
    half = rows // n_head // 2
    return w.reshape(n_head, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def values(t):
    shape = tuple(int(d) for d in reversed(t.shape))
    if t.tensor_type == GGMLQuantizationType.F32:
        return np.array(t.data, dtype=np.float32).reshape(shape)
    return np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def sp_model(tokens, scores, types):
    """A SentencePiece ModelProto with only its pieces (field 1)."""
    out = bytearray()
    for tok, score, ty in zip(tokens, scores, types):
        p = tok.encode()
        piece = b"\x0a" + varint(len(p)) + p + b"\x15" + struct.pack("<f", score) + b"\x18" + varint(ty)
        out += b"\x0a" + varint(len(piece)) + piece
    return bytes(out)


def main():
    src, out = sys.argv[2], sys.argv[3]
    shards = int(sys.argv[sys.argv.index("--shards") + 1]) if "--shards" in sys.argv else 1
    dump = sys.argv[sys.argv.index("--dump") + 1] if "--dump" in sys.argv else None
    r = GGUFReader(src)
    arch = field(r, "general.architecture")
    k = lambda s, d=None: field(r, f"{arch}.{s}", d)
    n_head, n_kv = k("attention.head_count"), k("attention.head_count_kv")
    os.makedirs(out, exist_ok=True)

    tensors, digests = {}, {}
    for t in r.tensors:
        w = values(t)
        digests[t.name] = hashlib.sha256(w.astype("<f4").tobytes()).hexdigest()
        hf = hf_name(arch, t.name)
        if arch == "llama" and t.name.endswith("attn_q.weight"):
            w = unpermute(w, n_head)
        elif arch == "llama" and t.name.endswith("attn_k.weight"):
            w = unpermute(w, n_kv)
        elif arch == "gemma3" and t.name.endswith("norm.weight"):
            w = w - np.float32(1.0)
        tensors[hf] = np.ascontiguousarray(w, dtype=np.float32)
    names = list(tensors)
    per = -(-len(names) // shards)
    if shards == 1:
        save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    else:
        weight_map = {}
        for i in range(shards):
            part = names[i * per:(i + 1) * per]
            fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            save_file({n: tensors[n] for n in part}, os.path.join(out, fname), metadata={"format": "pt"})
            weight_map.update({n: fname for n in part})
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)

    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    ids = lambda key: field(r, f"tokenizer.ggml.{key}_token_id")
    text = lambda key: tokens[ids(key)] if ids(key) is not None else None
    real = [i for i, t in enumerate(tokens) if not (types[i] == 5 and t.startswith("[PAD"))]
    key_length = k("attention.key_length")
    config = {
        "hidden_size": k("embedding_length"), "intermediate_size": k("feed_forward_length"),
        "num_hidden_layers": k("block_count"), "num_attention_heads": n_head,
        "num_key_value_heads": n_kv, "max_position_embeddings": k("context_length"),
        "rms_norm_eps": k("attention.layer_norm_rms_epsilon"), "rope_theta": k("rope.freq_base"),
        "vocab_size": len(tokens), "tie_word_embeddings": "lm_head.weight" not in tensors,
        "bos_token_id": ids("bos"), "eos_token_id": ids("eos"), "torch_dtype": "float32",
    }
    if arch == "llama":
        config.update(model_type="llama", architectures=["LlamaForCausalLM"])
    elif arch == "qwen2":
        config.update(model_type="qwen2", architectures=["Qwen2ForCausalLM"])
    else:
        config.update(model_type="gemma3_text", architectures=["Gemma3ForCausalLM"],
                      head_dim=key_length, sliding_window=k("attention.sliding_window"),
                      query_pre_attn_scalar=key_length, rope_local_base_freq=10000.0)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)

    tc = {"bos_token": text("bos"), "eos_token": text("eos"), "pad_token": text("padding"),
          "unk_token": text("unknown"), "model_max_length": k("context_length")}
    for key in ("add_bos_token", "add_eos_token"):
        v = field(r, f"tokenizer.ggml.{key}")
        if v is not None:
            tc[key] = bool(v)
    template = field(r, "tokenizer.chat_template")
    if template is not None:
        tc["chat_template"] = template
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": types[i] == 3}
             for i in real if types[i] in (3, 4)]
    tc["added_tokens_decoder"] = {str(a["id"]): {kk: v for kk, v in a.items() if kk != "id"}
                                  for a in added}

    if arch == "gemma3":
        scores = field(r, "tokenizer.ggml.scores")
        with open(os.path.join(out, "tokenizer.model"), "wb") as f:
            f.write(sp_model([tokens[i] for i in real], [scores[i] for i in real],
                             [types[i] for i in real]))
    else:
        pre = {"smollm": SMOLLM_PRE, "qwen2": QWEN2_PRE}[field(r, "tokenizer.ggml.pre")]
        tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
              "normalizer": None, "pre_tokenizer": pre,
              "post_processor": {"type": "ByteLevel", "add_prefix_space": False,
                                 "trim_offsets": False, "use_regex": False},
              "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                          "use_regex": True},
              "model": {"type": "BPE", "dropout": None, "unk_token": None,
                        "continuing_subword_prefix": "", "end_of_word_suffix": "",
                        "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                        "vocab": {tokens[i]: i for i in real if types[i] not in (3, 4)},
                        "merges": field(r, "tokenizer.ggml.merges")}}
        with open(os.path.join(out, "tokenizer.json"), "w") as f:
            json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, ensure_ascii=False, indent=1)
    if dump:
        with open(dump, "w") as f:
            json.dump(digests, f)
    print(f"wrote {out}: {len(tensors)} tensors in {shards} shard(s), {len(real)} tokens")


if __name__ == "__main__":
    main()
