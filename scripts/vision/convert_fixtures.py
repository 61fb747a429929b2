#!/usr/bin/env python3
"""Makes the small Hugging Face folders of tests/data/vision/convert/<family>: the tiny vision
models of tiny_models.py without their text weights (the text model is what makes those
folders 13-39 MB: its vocabulary), so `weft convert`'s mmproj path can be tested in CI.

usage: convert_fixtures.py HF_FOLDER OUT_FOLDER

Keeps config.json, preprocessor_config.json and processor_config.json as they are, and the
vision tower + projector tensors in their stored dtype (the same values as the full folder), so
llama.cpp's `convert_hf_to_gguf.py --mmproj --outtype f16` makes the same mmproj from either
(make-references.sh checks that with cmp).
"""
import json
import shutil
import sys
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file

VISION_PREFIXES = (
    "model.vision_model.", "model.connector.",  # idefics3
    "visual.",  # qwen2.5-vl
    "vision_tower.", "multi_modal_projector.",  # gemma3
)


def main() -> None:
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "preprocessor_config.json", "processor_config.json"):
        if (src / name).is_file():
            shutil.copy(src / name, out / name)
    tensors = {}
    with safe_open(src / "model.safetensors", framework="pt") as f:
        for k in f.keys():
            if k.startswith(VISION_PREFIXES):
                tensors[k] = f.get_tensor(k).contiguous()
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    print(json.dumps({"tensors": len(tensors), "bytes": (out / "model.safetensors").stat().st_size}))


if __name__ == "__main__":
    main()
