#!/usr/bin/env bash
# Embeddings per second (docs/benchmarks.md, "Embeddings"): Weft vs sentence-transformers on
# PyTorch CPU vs llama.cpp's embedding path, all-MiniLM-L6-v2, batches of 1 / 32 / 256
# sentences of ~128 tokens, 2 threads. Needs: the model folder (scripts/fetch-models.sh minilm),
# the sentence-transformers venv (scripts/make-embedding-reference.sh), llama.cpp
# (bench/build-llamacpp.sh) and its GGUF of the model (scripts/convert-minilm-llamacpp.sh).
# Usage: bench/embeddings.sh [REPS]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
models="${WEFT_MODELS_DIR:-$root/models}"
venv="${WEFT_ST_VENV:-$HOME/.cache/weft/st-venv}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"
eval "$("$root/bench/build-llamacpp.sh")"
gguf="$("$root/scripts/convert-minilm-llamacpp.sh")"
"$venv/bin/python" -c 'import diskcache' 2>/dev/null || "$venv/bin/pip" install -q diskcache
(cd "$root" && cargo build --release -q -p weft-server)
PYTHONPATH="$LLAMACPP_PYTHONPATH" "$venv/bin/python" "$root/bench/embeddings_bench.py" \
  "$CARGO_TARGET_DIR/release/weft" "$models/all-MiniLM-L6-v2" "$gguf" "${1:-3}"
