#!/usr/bin/env python3
"""Reference dequantization of every tensor of a GGUF model, with the `gguf` package.

Writes JSON {tensor name: {"type", "n", "fp"}} where "fp" is a fingerprint of the
little-endian f32 bytes of `gguf.quants.dequantize` (see `fingerprint`). The result is
cached under $WEFT_QUANT_CACHE (default: /tmp/weft-quant-ref) keyed by the model's sha256,
because dequantizing a model in numpy takes a while.

  quant_reference.py MODEL                 print the cache file path (computing it if needed)
  quant_reference.py MODEL --dump NAME OUT write tensor NAME's f32 values to OUT (for diffs)

The fingerprint is two wrapping 64-bit sums over the f32 bit patterns w[i] (i = element
index): h1 = sum(w[i] * (i*K1 + K2 | 1)), h2 = sum((w[i]*K3) ^ (i*K4)). Every multiplier of
h1 is odd, so any single changed element changes h1. Rust computes the same (tests).
"""
import hashlib
import json
import os
import sys

import numpy as np
import gguf

VERSION = 1
K1 = np.uint64(0x9E3779B97F4A7C15)
K2 = np.uint64(0x632BE59BD9B4E019)
K3 = np.uint64(0xD6E8FEB86659FD93)
K4 = np.uint64(0xA0761D6478BD642F)
ROWS_PER_CHUNK = 1024


class Fingerprint:
    def __init__(self):
        self.h1 = np.uint64(0)
        self.h2 = np.uint64(0)
        self.n = 0

    def update(self, values: np.ndarray):
        w = np.ascontiguousarray(values, dtype="<f4").reshape(-1).view("<u4").astype(np.uint64)
        i = np.arange(self.n, self.n + w.size, dtype=np.uint64)
        with np.errstate(over="ignore"):
            m = (i * K1 + K2) | np.uint64(1)
            self.h1 = np.uint64(self.h1 + np.sum(w * m, dtype=np.uint64))
            self.h2 = np.uint64(self.h2 + np.sum((w * K3) ^ (i * K4), dtype=np.uint64))
        self.n += w.size

    def hex(self):
        return f"{int(self.h1):016x}{int(self.h2):016x}"


def dequantized_chunks(t):
    data = t.data
    rows = data.reshape(-1, data.shape[-1]) if data.ndim > 1 else data.reshape(1, -1)
    for start in range(0, rows.shape[0], ROWS_PER_CHUNK):
        yield gguf.quants.dequantize(rows[start:start + ROWS_PER_CHUNK], t.tensor_type)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()


def compute(path):
    reader = gguf.GGUFReader(path)
    out = {}
    for t in reader.tensors:
        fp = Fingerprint()
        for chunk in dequantized_chunks(t):
            fp.update(chunk)
        out[t.name] = {"type": t.tensor_type.name, "n": fp.n, "fp": fp.hex()}
    return out


def main():
    path = sys.argv[1]
    if len(sys.argv) == 5 and sys.argv[2] == "--dump":
        reader = gguf.GGUFReader(path)
        t = next(t for t in reader.tensors if t.name == sys.argv[3])
        with open(sys.argv[4], "wb") as f:
            for chunk in dequantized_chunks(t):
                f.write(np.ascontiguousarray(chunk, dtype="<f4").tobytes())
        return
    cache = os.environ.get("WEFT_QUANT_CACHE", "/tmp/weft-quant-ref")
    os.makedirs(cache, exist_ok=True)
    target = os.path.join(cache, f"{sha256(path)}-v{VERSION}.json")
    if not os.path.exists(target):
        tmp = target + f".tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(compute(path), f, indent=0)
        os.replace(tmp, target)
    print(target)


if __name__ == "__main__":
    main()
