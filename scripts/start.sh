#!/usr/bin/env bash
# Fetches the default model (Qwen2.5-Coder 0.5B Instruct), builds weft in release mode and serves it
# on http://127.0.0.1:8080 (OpenAI API at /v1, Ollama API at /api). Extra arguments go to
# `weft serve`, e.g. scripts/start.sh --port 9000 --backend wgpu.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"
scripts/fetch-models.sh qwen2
model="${WEFT_MODELS_DIR:-$root/models}/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
cargo build --release -p weft-server
exec "$CARGO_TARGET_DIR/release/weft" serve --model "$model" "$@"
