"""Where mtmd's Idefics3 embeddings part from an f32 computation: the tiny encoder of
tests/data/vision/idefics3 in numpy, with ggml's CPU f16 roundings switched on one by one, each
variant compared with mtmd's output (S.embd.f32) and transformers' (S.hf_embd.f32).

usage: python idefics3_numerics.py [DATA_DIR]   (default tests/data/vision/idefics3)

Variants (cumulative):
  f32          everything in f32 (what transformers computes)
  +f16 im2col  patch pixels and the patch kernel rounded to f16 (ggml_conv_2d builds its
               im2col in f16, so the f32 kernel is converted to f16 for the product too)
  +gelu table  GELU's input and output rounded to f16 (ggml's GELU lookup table)
  +f16 matmul  activations rounded to f16 before every product with an f16 weight (ggml
               converts src1 to the weight's vec_dot type)
  +f16 K/V     keys and values rounded to f16 (clip casts them for flash attention)

Result (2026-12-07): each rounding moves the computation away from transformers by about what
mtmd is away from it (all four: 1.4-1.8e-3 max-abs, mtmd 1.56-1.91e-3), and towards mtmd
(1 - cosine 2.5x smaller; max-abs 1.1-1.5e-3 from 1.6-1.9e-3). Not to within 1e-3: once values
are rounded to f16, a last-bit difference before a rounding flips it (2^-11 relative), so only
a bit-exact replica of ggml's kernels would reproduce mtmd. Checked node by node on one tile
with mtmd_ref's MTMD_REF_DUMP_NODE: with the f16 im2col, the patch embedding agrees to 1.3e-6
(6.3e-4 without it); the first product after it to rms 1.2e-5 with f16 activations (2.1e-4
without).
"""
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from PIL import Image


def tensors(path: Path) -> dict:
    out = {}
    for t in GGUFReader(str(path)).tensors:
        a = np.array(t.data)
        shape = [int(d) for d in reversed(t.shape.tolist())]  # outermost first
        out[t.name] = (a.astype(np.float32).reshape(shape), a.dtype == np.float16)
    return out


def f16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).astype(np.float32)


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.float32(0.7978846) * x * (1.0 + np.float32(0.044715) * x * x)))


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class Encoder:
    def __init__(self, mmproj: Path):
        self.t = tensors(mmproj)
        r = GGUFReader(str(mmproj))
        kv = {f.name: f for f in r.fields.values()}

        def scalar(k):
            f = kv[k]
            return f.parts[f.data[0]][0]

        self.n_layer = int(scalar("clip.vision.block_count"))
        self.n_head = int(scalar("clip.vision.attention.head_count"))
        self.eps = float(scalar("clip.vision.attention.layer_norm_epsilon"))
        self.scale = int(scalar("clip.vision.projector.scale_factor"))
        self.patch = int(scalar("clip.vision.patch_size"))

    def lin(self, name, x, mm16):
        w, is16 = self.t[name + ".weight"]
        if mm16 and is16:
            x = f16(x)
        y = x @ w.T
        b = self.t.get(name + ".bias")
        return y + b[0].ravel() if b is not None else y

    def run(self, pixels: np.ndarray, im2col16: bool, gelu16: bool, mm16: bool, kv16: bool) -> np.ndarray:
        p = self.patch
        c, s, _ = pixels.shape
        side = s // p
        patches = pixels.reshape(c, side, p, side, p).transpose(1, 3, 0, 2, 4).reshape(side * side, -1)
        kernel, _ = self.t["v.patch_embd.weight"]
        if im2col16:
            patches, kernel = f16(patches), f16(kernel)
        x = patches @ kernel.reshape(kernel.shape[0], -1).T + self.t["v.patch_embd.bias"][0].ravel()
        x = x + self.t["v.position_embd.weight"][0].reshape(side * side, -1)
        n, d = x.shape
        hd = d // self.n_head
        for i in range(self.n_layer):
            pre = f"v.blk.{i}."
            ln = lambda k, y: layer_norm(y, self.t[pre + k + ".weight"][0].ravel(), self.t[pre + k + ".bias"][0].ravel(), self.eps)
            h = ln("ln1", x)
            q, k, v = (self.lin(pre + a, h, mm16) for a in ("attn_q", "attn_k", "attn_v"))
            if kv16:
                k, v = f16(k), f16(v)
            heads = []
            for hh in range(self.n_head):
                sl = slice(hh * hd, (hh + 1) * hd)
                a = (q[:, sl] @ k[:, sl].T) / np.float32(np.sqrt(hd))
                a = np.exp(a - a.max(-1, keepdims=True))
                a = a / a.sum(-1, keepdims=True)
                heads.append(a @ v[:, sl])
            x = x + self.lin(pre + "attn_out", np.concatenate(heads, -1), mm16)
            h = ln("ln2", x)
            f = self.lin(pre + "ffn_up", h, mm16)
            f = f16(gelu(f16(f))) if gelu16 else gelu(f)
            x = x + self.lin(pre + "ffn_down", f, mm16)
        x = layer_norm(x, self.t["v.post_ln.weight"][0].ravel(), self.t["v.post_ln.bias"][0].ravel(), self.eps)
        sc, o = self.scale, side // self.scale
        x = x.reshape(o, sc, o, sc, d).transpose(0, 2, 1, 3, 4).reshape(o * o, sc * sc * d)
        return self.lin("mm.model.fc", x, mm16)


def compare(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return a @ b / np.sqrt((a @ a) * (b @ b)), np.abs(a - b).max()


def main() -> None:
    data = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/vision/idefics3")
    enc = Encoder(data / "mmproj-idefics3-tiny-f16.gguf")
    variants = [
        ("f32", (False, False, False, False)),
        ("+f16 im2col", (True, False, False, False)),
        ("+gelu table", (True, True, False, False)),
        ("+f16 matmul", (True, True, True, False)),
        ("+f16 K/V", (True, True, True, True)),
    ]
    stems = sorted({p.name.split(".")[0] for p in data.glob("*.embd.f32")})
    print(f"{'image':<18} {'variant':<12} {'vs mtmd: cos / max-abs':<28} vs transformers")
    for stem in stems:
        mtmd = np.fromfile(data / f"{stem}.embd.f32", dtype="<f4")
        hf = np.fromfile(data / f"{stem}.hf_embd.f32", dtype="<f4")
        pngs = sorted(data.glob(f"{stem}.pixels.*.png"), key=lambda p: int(p.name.split(".")[2]))
        inputs = []
        for png in pngs:
            u8 = np.asarray(Image.open(png).convert("RGB"), dtype=np.float32)
            inputs.append(((u8 / np.float32(255.0) - np.float32(0.5)) / np.float32(0.5)).transpose(2, 0, 1))
        for name, flags in variants:
            got = np.concatenate([enc.run(px, *flags).ravel() for px in inputs])
            cm, dm = compare(got, mtmd)
            ch, dh = compare(got, hf)
            print(f"{stem:<18} {name:<12} {cm:.9f} / {dm:.2e}         {ch:.9f} / {dh:.2e}")


if __name__ == "__main__":
    main()
