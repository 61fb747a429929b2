#!/usr/bin/env bash
# Converts the all-MiniLM-L6-v2 folder to GGUF with llama.cpp's own converter
# (convert_hf_to_gguf.py and the gguf-py it ships, from the llama.cpp source that
# bench/build-llamacpp.sh unpacks), f32 like the safetensors file, into
# $WEFT_MODELS_DIR/all-MiniLM-L6-v2.llamacpp-f32.gguf.
#
# Used once, by hand, to confirm that the GGUF Weft's tests write themselves
# (HfModel::to_gguf, tensors in llama.cpp's names and keys) has llama.cpp's layout:
# `cargo test -p weft-core --test embed_llamacpp_layout -- --ignored`; and by bench/embeddings.sh
# (llama.cpp's embedding path reads this file). CI needs neither: nothing it produces is committed.
# The converter's Python packages (torch, transformers, numpy) are those of the
# sentence-transformers venv (~/.cache/weft/st-venv, made by scripts/make-embedding-reference.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
models="${WEFT_MODELS_DIR:-$root/models}"
venv="${WEFT_ST_VENV:-$HOME/.cache/weft/st-venv}"
src="${LLAMACPP_DIR:-$HOME/.cache/weft/llamacpp}/src/vendor/llama.cpp"
out="$models/all-MiniLM-L6-v2.llamacpp-f32.gguf"
"$root/scripts/fetch-models.sh" minilm >&2
[ -f "$src/convert_hf_to_gguf.py" ] || eval "$("$root/bench/build-llamacpp.sh")"
if [ ! -x "$venv/bin/python" ]; then
  echo "convert: run scripts/make-embedding-reference.sh first (it makes $venv)" >&2
  exit 1
fi
"$venv/bin/python" -c 'import yaml, tqdm' 2>/dev/null || "$venv/bin/pip" install -q pyyaml tqdm
if [ ! -f "$out" ]; then
  PYTHONPATH="$src/gguf-py" "$venv/bin/python" "$src/convert_hf_to_gguf.py" \
    "$models/all-MiniLM-L6-v2" --outtype f32 --outfile "$out.tmp" >&2
  mv "$out.tmp" "$out"
fi
echo "$out"
