#!/usr/bin/env bash
# `weft serve` against llama.cpp's server (llama-cpp-python[server] 0.3.36) on the same model
# and threads: aggregate generation tokens/s and time to first token at concurrency 1, 4, 16,
# servers run alternately (never both at once), greedy streamed chat completions.
# Usage: bench/compare-server.sh [MODEL.gguf]   (default: SmolLM2-135M-Instruct Q4_1)
# Env: WEFT_BIN (a built binary), THREADS (2), CONC (1,4,16), PER (2 requests per client thread), N (64 max tokens),
#      ROUNDS (1: alternations), WEFT_ARGS (extra `weft serve` flags)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"
THREADS="${THREADS:-2}" CONC="${CONC:-1,4,16}" PER="${PER:-2}" N="${N:-64}" ROUNDS="${ROUNDS:-1}"
venv="$HOME/.cache/weft/llamacpp-venv"
wheels="$HOME/.cache/weft/llamacpp-wheels"
model="${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"

# llama-cpp-python: the wheel bench/compare-llamacpp.sh builds, plus the server extras from PyPI.
if ! "$venv/bin/python" -c "import llama_cpp.server, uvicorn" 2>/dev/null; then
  if [ ! -x "$venv/bin/python" ]; then
    echo "compare-server: no $venv; run bench/compare-llamacpp.sh once (it builds llama-cpp-python)" >&2
    exit 1
  fi
  "$venv/bin/pip" install -q --find-links "$wheels" "llama-cpp-python[server]==0.3.36"
fi
# WEFT_BIN: an already built release binary (skips the build).
if [ -z "${WEFT_BIN:-}" ]; then
  cargo build -q --release -p weft-server
fi
weft="${WEFT_BIN:-$CARGO_TARGET_DIR/release/weft}"
port=$((20000 + RANDOM % 20000))
base="http://127.0.0.1:$port"

wait_ready() { # url
  for _ in $(seq 600); do
    curl -sf "$1" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "server did not become ready" >&2
  return 1
}

run_weft() {
  "$weft" serve --model "$model" --port "$port" --threads "$THREADS" --parallel 16 --ctx 512 \
    --alias bench ${WEFT_ARGS:-} 2>/dev/null &
  local pid=$!
  wait_ready "$base/ready"
  python3 bench/server_load.py --base "$base" --model bench --concurrency "$CONC" \
    --requests-per-thread "$PER" --max-tokens "$N" | sed 's/^/weft      /'
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

run_llama() {
  "$venv/bin/python" -m llama_cpp.server --model "$model" --port "$port" --n_threads "$THREADS" \
    --n_threads_batch "$THREADS" --n_ctx 2048 --model_alias bench --interrupt_requests False >/dev/null 2>&1 &
  local pid=$!
  wait_ready "$base/v1/models"
  python3 bench/server_load.py --base "$base" --model bench --concurrency "$CONC" \
    --requests-per-thread "$PER" --max-tokens "$N" | sed 's/^/llama.cpp /'
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

echo "date: $(date -u +%F) cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) threads: $THREADS model: $(basename "$model") max_tokens: $N load: $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$ROUNDS"); do
  run_llama
  run_weft
done
