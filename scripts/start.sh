#!/usr/bin/env bash
# Fetches the reference models (scripts/fetch-models.sh), builds weft in release mode and serves
# every one of them on http://127.0.0.1:8080 (OpenAI API at /v1, Ollama API at /api), with
# Qwen2.5-Coder 0.5B Instruct as the default model. Extra arguments go to `weft serve`, e.g.
# scripts/start.sh --port 9000 --backend wgpu.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"
scripts/fetch-models.sh
models="${WEFT_MODELS_DIR:-$root/models}"
cargo build --release -p weft-server
exec "$CARGO_TARGET_DIR/release/weft" serve --model "$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" \
  --models-dir "$models" "$@"
