"""Checks a GGUF that `weft convert` made from a folder written by gguf_to_hf.py against the
GGUF the folder came from: the same tensor names and shapes, F32 tensors whose bytes hash to
what gguf_to_hf.py dumped (exact), and the same metadata that matters (the model's
hyper-parameters, the tokenizer: tokens, types, merges or scores, special ids, chat template).

usage: compare_converted.py _ CONVERTED.gguf ORIGINAL.gguf DIGESTS.json [--close NAME_SUFFIX]
--close: tensors whose name ends so are compared within 1e-6 instead of exactly (Gemma's
norms: `(w - 1) + 1` is not always `w` in F32). Prints one line per difference; exits 1 on any.
"""

import hashlib
import json
import sys

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType
from gguf.quants import dequantize

MODEL_KEYS = ["block_count", "context_length", "embedding_length", "feed_forward_length",
              "attention.head_count", "attention.head_count_kv", "rope.freq_base",
              "attention.layer_norm_rms_epsilon", "rope.dimension_count", "vocab_size",
              "attention.key_length", "attention.value_length", "attention.sliding_window"]
TOKENIZER_KEYS = ["model", "pre", "tokens", "token_type", "merges", "scores", "bos_token_id",
                  "eos_token_id", "unknown_token_id", "padding_token_id", "add_bos_token"]


def contents(r, key):
    f = r.fields.get(key)
    return None if f is None else f.contents()


def main():
    conv, orig = GGUFReader(sys.argv[2]), GGUFReader(sys.argv[3])
    digests = json.load(open(sys.argv[4]))
    close = sys.argv[sys.argv.index("--close") + 1] if "--close" in sys.argv else None
    bad = []
    arch = contents(orig, "general.architecture")
    if contents(conv, "general.architecture") != arch:
        bad.append(f"architecture {contents(conv, 'general.architecture')} != {arch}")
    for k in [f"{arch}.{k}" for k in MODEL_KEYS] + [f"tokenizer.ggml.{k}" for k in TOKENIZER_KEYS] + ["tokenizer.chat_template"]:
        a, b = contents(conv, k), contents(orig, k)
        if isinstance(a, float) and isinstance(b, float):
            same = abs(a - b) <= 1e-6 * max(1.0, abs(b))
        else:
            same = a == b
        if not same:
            show = lambda v: (f"{len(v)} items" if isinstance(v, list) else repr(v)[:80])
            detail = ""
            if isinstance(a, list) and isinstance(b, list):
                diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
                detail = f"; {len(diff)} differ, first {diff[:3]}: {[a[i] for i in diff[:3]]} vs {[b[i] for i in diff[:3]]}"
            bad.append(f"{k}: {show(a)} != {show(b)}{detail}")
    ct = {t.name: t for t in conv.tensors}
    ot = {t.name: t for t in orig.tensors}
    if set(ct) != set(ot):
        bad.append(f"tensor names differ: only converted {sorted(set(ct) - set(ot))[:5]}, only original {sorted(set(ot) - set(ct))[:5]}")
    for name in sorted(set(ct) & set(ot)):
        c, o = ct[name], ot[name]
        if list(c.shape) != list(o.shape):
            bad.append(f"{name}: shape {list(c.shape)} != {list(o.shape)}")
            continue
        if c.tensor_type != GGMLQuantizationType.F32:
            continue
        got = np.array(c.data, dtype=np.float32).reshape(-1)
        if hashlib.sha256(got.astype("<f4").tobytes()).hexdigest() == digests[name]:
            continue
        if close and name.endswith(close):
            want = np.asarray(dequantize(o.data, o.tensor_type), dtype=np.float32).reshape(-1)
            if np.max(np.abs(got - want)) <= 1e-6:
                continue
        bad.append(f"{name}: values differ from the original's dequantized values")
    for b in bad:
        print(b)
    checked = sum(1 for n in ct if ct[n].tensor_type == GGMLQuantizationType.F32)
    print(f"{len(ct)} tensors ({checked} F32 compared), {len(bad)} differences")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
