#!/usr/bin/env python3
"""Independent checks of quantized GGUF files with gguf-py (PyPI `gguf`).

  quantize_check.py same A.gguf B.gguf
      Compares two files tensor by tensor (names, types, shapes, bytes) and, for tensors
      whose bytes differ, counts identical blocks. Prints one JSON object.
  quantize_check.py bound SOURCE.gguf OUT.gguf
      Dequantizes every tensor of OUT and of SOURCE with gguf-py and checks each block's
      largest error against the format's bound (see BOUND). Prints one JSON object; exits 1
      when a tensor is out of bounds.
"""
import json
import sys

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType as T
from gguf.quants import dequantize

# Largest |error| of an element, as a multiple of its block's largest magnitude (amax) for
# the symmetric formats and of its block's range (max - min) for the ones with a minimum.
# Q8_0: half a step amax/127 (plus the f16 rounding of the scale); Q4_0/Q5_0: one step
# (amax/8, amax/16: the extreme of the other sign is clamped); Q4_1/Q5_1: half a step of
# range/15, range/31 plus the f16 rounding of the minimum; K formats: their sub-block grids
# are fitted by least squares with 6-bit scales, which can clip: one step of the 256-value
# super-block's range, with 10 % slack for the scale codes.
BOUND = {
    T.F32: ("amax", 0.0),
    T.F16: ("amax", 2 ** -11),
    T.BF16: ("amax", 2 ** -8),
    T.Q8_0: ("amax", 0.5 / 127 * 1.01),
    T.Q4_0: ("amax", 1 / 8 * 1.01),
    T.Q5_0: ("amax", 1 / 16 * 1.01),
    T.Q4_1: ("range", 0.5 / 15 * 1.02),
    T.Q5_1: ("range", 0.5 / 31 * 1.04),
    T.Q4_K: ("range", 1 / 15 * 1.1),
    T.Q5_K: ("range", 1 / 31 * 1.1),
    T.Q6_K: ("amax", 1 / 32 * 1.1),
}
BLOCK = {T.Q4_K: 256, T.Q5_K: 256, T.Q6_K: 256}


def tensors(path):
    r = GGUFReader(path)
    return {t.name: t for t in r.tensors}


def same(a, b):
    ta, tb = tensors(a), tensors(b)
    out = {"tensors": len(ta), "identical": 0, "differ": []}
    if set(ta) != set(tb):
        out["names_differ"] = sorted(set(ta) ^ set(tb))
    for name, x in ta.items():
        y = tb.get(name)
        if y is None:
            continue
        if x.tensor_type != y.tensor_type or list(x.shape) != list(y.shape):
            out["differ"].append({"name": name, "types": [x.tensor_type.name, y.tensor_type.name]})
            continue
        bx, by = np.asarray(x.data).tobytes(), np.asarray(y.data).tobytes()
        if bx == by:
            out["identical"] += 1
            continue
        size = 1
        from gguf.constants import GGML_QUANT_SIZES
        block, tsize = GGML_QUANT_SIZES[x.tensor_type]
        ax = np.frombuffer(bx, np.uint8).reshape(-1, tsize)
        ay = np.frombuffer(by, np.uint8).reshape(-1, tsize)
        eq = int((ax == ay).all(axis=1).sum())
        out["differ"].append({"name": name, "type": x.tensor_type.name,
                              "blocks": len(ax), "identical_blocks": eq})
    print(json.dumps(out))
    return 0


def bound(src, dst):
    ts, td = tensors(src), tensors(dst)
    worst = []
    bad = 0
    for name, y in td.items():
        x = ts[name]
        xs = dequantize(x.data, x.tensor_type).astype(np.float32).reshape(-1)
        ys = dequantize(y.data, y.tensor_type).astype(np.float32).reshape(-1)
        kind, k = BOUND[y.tensor_type]
        if y.tensor_type == x.tensor_type:
            ok = np.array_equal(xs.view(np.uint32), ys.view(np.uint32))
            ratio = 0.0 if ok else float("inf")
        else:
            blk = BLOCK.get(y.tensor_type, 32 if k else 1)
            xb = xs.reshape(-1, blk)
            err = np.abs(xb - ys.reshape(-1, blk)).max(axis=1)
            if kind == "amax":
                scale = np.abs(xb).max(axis=1)
            else:
                scale = xb.max(axis=1) - np.minimum(xb.min(axis=1), 0)
            allowed = k * scale + 1e-30
            ratio = float((err / allowed).max()) if k else float(err.max())
            ok = ratio <= 1.0
        if not ok:
            bad += 1
        worst.append((ratio, name, y.tensor_type.name))
    worst.sort(reverse=True)
    print(json.dumps({"tensors": len(td), "out_of_bound": bad,
                      "worst": [{"name": n, "type": t, "error_over_bound": r} for r, n, t in worst[:5]]}))
    return 1 if bad else 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    sys.exit({"same": same, "bound": bound}[cmd](*sys.argv[2:]))
