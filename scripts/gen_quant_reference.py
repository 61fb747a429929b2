#!/usr/bin/env python3
"""Writes tests/reference/quant/: a synthetic f32 input and what llama.cpp's GGML quantizes it
to, so `cargo test` can check Weft's weight quantizers byte for byte without llama.cpp.

It calls `ggml_quantize_chunk` (the function `llama-quantize` uses, without an importance
matrix) from the libggml-base.so that bench/build-llamacpp.sh builds:

    eval "$(bench/build-llamacpp.sh)"
    python3 scripts/gen_quant_reference.py "$LLAMA_CPP_LIB_PATH"

Input: 64 rows of 512 values (numpy seed 7): Gaussian rows whose scale spans four decades, rows
with outliers, all-positive and all-negative rows, a row of zeros, a constant row and a row of
tiny values, so every branch of the quantizers is taken.
"""
import ctypes
import json
import os
import sys

import numpy as np

TYPES = {"q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "q4_K": 12, "q5_K": 13, "q6_K": 14}
ROWS, COLS = 64, 512


def data():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    x *= (10.0 ** rng.uniform(-3, 1, (ROWS, 1))).astype(np.float32)
    x[1] = np.abs(x[1])
    x[2] = -np.abs(x[2])
    x[3, ::37] *= 40
    x[4] = 0
    x[5] = 0.75
    x[6] *= 1e-9
    x[7, :256] = 0
    return x


def main(libdir):
    lib = ctypes.CDLL(os.path.join(libdir, "libggml-base.so"))
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    out = os.path.join(os.path.dirname(__file__), "..", "tests", "reference", "quant")
    os.makedirs(out, exist_ok=True)
    x = np.ascontiguousarray(data())
    x.tofile(os.path.join(out, "input.f32"))
    sizes = {}
    for name, t in TYPES.items():
        buf = ctypes.create_string_buffer(ROWS * COLS * 2)
        n = lib.ggml_quantize_chunk(t, x.ctypes.data, buf, 0, ROWS, COLS, None)
        with open(os.path.join(out, f"{name}.bin"), "wb") as f:
            f.write(buf.raw[:n])
        sizes[name] = n
    meta = {"rows": ROWS, "cols": COLS, "source": "ggml_quantize_chunk of llama.cpp 0c1e57098 "
            "(llama-cpp-python 0.3.36 sdist), no imatrix", "bytes": sizes}
    with open(os.path.join(out, "README.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta))


if __name__ == "__main__":
    main(sys.argv[1])
