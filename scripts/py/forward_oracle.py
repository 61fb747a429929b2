#!/usr/bin/env python3
"""Exact (float64) forward pass of a GGUF model with NumPy, as an independent oracle.

Dequantizes the weights with the `gguf` package and evaluates the graph of the `llama`,
`qwen2` or `gemma3` architecture without any of the rounding an engine does (no f16 KV cache,
no 8-bit activations). Prints the top-5 logits after a reference case's prompt next to
llama.cpp's, e.g. to tell a modelling bug from rounding noise:

    python3 scripts/py/forward_oracle.py models/gemma-3-270m-q4_k_m.gguf \
        tests/reference/gemma3-270m.dev.json 0
"""
import json
import sys

import gguf
import numpy as np
from gguf.quants import dequantize


def main():
    path, ref_path, case_index = sys.argv[1], sys.argv[2], int(sys.argv[3])
    r = gguf.GGUFReader(path)
    tensors = {t.name: t for t in r.tensors}
    arch = r.fields["general.architecture"].contents()

    def meta(key, default=None):
        f = r.fields.get(f"{arch}.{key}")
        return default if f is None else f.contents()

    def w(name):
        t = tensors[name]
        a = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64)
        return a.reshape([int(x) for x in reversed(t.shape)])

    d = meta("embedding_length")
    n_layer = meta("block_count")
    nh = meta("attention.head_count")
    nkv = meta("attention.head_count_kv", nh)
    hd = meta("attention.key_length", d // nh)
    eps = meta("attention.layer_norm_rms_epsilon")
    base = meta("rope.freq_base", 10000.0)
    gemma = arch == "gemma3"
    neox = arch in ("qwen2", "gemma3")

    case = json.load(open(ref_path))["cases"][case_index]
    ids = case["prompt_ids"]
    n = len(ids)
    pos = np.arange(n)
    emb = w("token_embd.weight")
    x = emb[ids] * (np.sqrt(d) if gemma else 1.0)

    def rms(v, wt):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * wt

    def rope(v, b):
        half = hd // 2
        th = pos[:, None] * (b ** (-2 * np.arange(half) / hd))[None, :]
        c, s = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
        if neox:
            a, bb = v[..., :half], v[..., half:]
            return np.concatenate([a * c - bb * s, a * s + bb * c], -1)
        out = np.empty_like(v)
        a, bb = v[..., 0::2], v[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * c - bb * s, a * s + bb * c
        return out

    def gelu(v):
        return 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v**3)))

    def silu(v):
        return v / (1 + np.exp(-v))

    window = meta("attention.sliding_window", 0)
    for il in range(n_layer):
        p = f"blk.{il}."
        local = gemma and il % 6 < 5
        b = 10000.0 if local else base
        h = rms(x, w(p + "attn_norm.weight"))

        def proj(name, heads):
            y = h @ w(p + name + ".weight").T
            if p + name + ".bias" in tensors:
                y = y + w(p + name + ".bias")
            return y.reshape(n, heads, hd)

        q, k, v = proj("attn_q", nh), proj("attn_k", nkv), proj("attn_v", nkv)
        if gemma:
            q = rms(q, w(p + "attn_q_norm.weight"))
            k = rms(k, w(p + "attn_k_norm.weight"))
        q, k = rope(q, b), rope(k, b)
        scale = 1.0 / np.sqrt(hd)
        out = np.zeros((n, nh, hd))
        for hh in range(nh):
            kv = hh // (nh // nkv)
            sc = q[:, hh, :] @ k[:, kv, :].T * scale
            mask = np.triu(np.ones((n, n)), 1).astype(bool)
            if local and window:
                mask |= (pos[:, None] - pos[None, :]) >= window
            sc[mask] = -np.inf
            sc = np.exp(sc - sc.max(-1, keepdims=True))
            sc /= sc.sum(-1, keepdims=True)
            out[:, hh, :] = sc @ v[:, kv, :]
        a = out.reshape(n, nh * hd) @ w(p + "attn_output.weight").T
        if gemma:
            a = rms(a, w(p + "post_attention_norm.weight"))
        x = x + a
        m = rms(x, w(p + "ffn_norm.weight"))
        act = gelu if gemma else silu
        f = act(m @ w(p + "ffn_gate.weight").T) * (m @ w(p + "ffn_up.weight").T)
        f = f @ w(p + "ffn_down.weight").T
        if gemma:
            f = rms(f, w(p + "post_ffw_norm.weight"))
        x = x + f
    out_w = w("output.weight") if "output.weight" in tensors else emb
    logits = out_w @ rms(x[-1], w("output_norm.weight"))
    top = np.argsort(-logits)[:5]
    print(json.dumps({
        "oracle": [[int(i), round(float(logits[i]), 4)] for i in top],
        "llama.cpp": case["steps"][0]["top5"],
    }))


if __name__ == "__main__":
    main()
