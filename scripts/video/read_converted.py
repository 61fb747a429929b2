"""Reads a file `weft convert` wrote from a diffusers Wan folder with the reference readers
(gguf-py's GGUFReader for .gguf, the safetensors package for .safetensors) and prints it as
JSON: metadata (GGUF; long arrays as their length), and every tensor's shape (PyTorch order),
type and values as float32. core/tests/video_wan_convert.rs compares that with the diffusers
folder, so the files are checked by the readers ComfyUI-GGUF and llama.cpp's tools use.

Usage: python3 scripts/video/read_converted.py FILE  (packages: scripts/requirements-test.txt)
"""

import json
import sys

import numpy as np


def read_gguf(path):
    import gguf

    r = gguf.GGUFReader(path)
    meta = {}
    for name, field in r.fields.items():
        if name.startswith("GGUF."):
            continue
        t = field.types[0]
        if t == gguf.GGUFValueType.ARRAY:
            meta[name] = {"array": len(field.data)}
        elif t == gguf.GGUFValueType.STRING:
            meta[name] = str(bytes(field.parts[field.data[-1]]), encoding="utf-8")
        else:
            meta[name] = field.parts[field.data[-1]].tolist()[0]
    tensors = {}
    for t in r.tensors:
        shape = [int(d) for d in reversed(t.shape.tolist())]
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        tensors[t.name] = {
            "shape": shape,
            "type": t.tensor_type.name,
            "values": values.reshape(-1).tolist(),
        }
    tokens = r.fields.get("tokenizer.ggml.tokens")
    if tokens is not None:
        meta["tokens"] = [str(bytes(tokens.parts[i]), encoding="utf-8") for i in tokens.data]
    return {"metadata": meta, "tensors": tensors}


def read_safetensors(path):
    from safetensors.numpy import load_file

    tensors = {}
    for name, a in load_file(path).items():
        tensors[name] = {
            "shape": list(a.shape),
            "type": str(a.dtype),
            "values": a.astype(np.float32).reshape(-1).tolist(),
        }
    return {"metadata": {}, "tensors": tensors}


def main():
    path = sys.argv[1]
    out = read_gguf(path) if path.endswith(".gguf") else read_safetensors(path)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
