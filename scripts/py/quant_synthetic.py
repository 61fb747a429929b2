#!/usr/bin/env python3
"""Synthetic dequantization / quantization cases from the `gguf` Python package.

  quant_synthetic.py OUT_DIR

Writes OUT_DIR/manifest.json, a list of cases {"name", "type", "n", "bytes", "values",
"source"}: `bytes` is a file of blocks, `values` the f32 little-endian values that
`gguf.quants.dequantize` gives for them, and `source` (or null) the f32 input that
`gguf.quants.quantize` turned into `bytes`. Types the package can quantize get such cases;
every dequantizable type also gets random valid blocks (random bits, with every f16 scale
replaced by a finite value of a sane magnitude). Deterministic (fixed seed).
"""
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

N = 4096  # elements per case: 16 super-blocks, 128 small blocks

# Byte offsets of the f16 scale fields inside a block, per type.
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0],
}
QUANTIZABLE = [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]


def random_blocks(rng, qtype):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(N // block, size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        mag = np.exp(rng.uniform(np.log(1e-5), np.log(4.0), size=blocks.shape[0]))
        sign = np.where(rng.random(blocks.shape[0]) < 0.2, -1.0, 1.0)
        scale = (mag * sign).astype(np.float16)
        scale[::17] = 0.0  # some zero scales
        blocks[:, off:off + 2] = scale.view(np.uint8).reshape(-1, 2)
    return blocks


def source_values(rng, qtype):
    x = rng.standard_normal(N).astype(np.float32) * np.float32(0.05)
    x[64:96] = 0.0  # an all-zero block
    x[96:128] *= 1000.0
    x[160] = 3.0  # a lone outlier
    if qtype in (T.F16, T.BF16):
        x[:8] = [0.0, -0.0, np.inf, -np.inf, 1e-8, -3e-7, 70000.0, 6e-5]
    return x


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261130)
    cases = []

    def emit(name, qtype, data, source):
        values = gguf.quants.dequantize(data, qtype).astype("<f4")
        base = os.path.join(out, name)
        data = np.ascontiguousarray(data)
        with open(base + ".bin", "wb") as f:
            f.write(data.view(np.uint8).tobytes())
        with open(base + ".f32", "wb") as f:
            f.write(values.tobytes())
        src = None
        if source is not None:
            src = name + ".src.f32"
            with open(os.path.join(out, src), "wb") as f:
                f.write(source.astype("<f4").tobytes())
        cases.append({"name": name, "type": qtype.name, "n": N, "bytes": name + ".bin",
                      "values": name + ".f32", "source": src})

    for qtype in QUANTIZABLE:
        x = source_values(rng, qtype)
        with np.errstate(over="ignore"):  # 70000 overflows f16 to inf on purpose
            data = gguf.quants.quantize(x, qtype)
        emit(f"quantized_{qtype.name}", qtype, data, x)
    for qtype in F16_FIELDS:
        emit(f"random_{qtype.name}", qtype, random_blocks(rng, qtype), None)

    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(cases, f, indent=1)
    print(out)


if __name__ == "__main__":
    main()
