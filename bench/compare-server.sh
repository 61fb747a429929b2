#!/usr/bin/env bash
# `weft serve` against llama.cpp's C++ `llama-server` (continuous batching over -np slots, built
# by bench/build-llamacpp.sh from the llama.cpp vendored in the llama-cpp-python 0.3.36 sdist) on
# the same model and threads: aggregate generation tokens/s, time to first token (p50 / p95) and
# inter-token latency (p50 / p95) at each concurrency, greedy streamed chat completions. The two
# servers run alternately, never both at once.
# Usage: bench/compare-server.sh [MODEL.gguf ...]   (default: Qwen2.5-Coder 0.5B Q4_K_M, then
#        Gemma 3 270M Q4_K_M)
# Env: WEFT_BIN (a built binary; default: build release), THREADS (2), CONC (1,4,16,64),
#      PER (2 requests per client thread; 4 at concurrency 1), N (48 max tokens), ROUNDS (1),
#      SLOTS (16: llama-server -np), CTX (1024: llama-server context per slot),
#      WEFT_ARGS (extra `weft serve` flags; none = weft's defaults)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"
THREADS="${THREADS:-2}" CONC="${CONC:-1,4,16,64}" PER="${PER:-2}" N="${N:-48}" ROUNDS="${ROUNDS:-1}"
SLOTS="${SLOTS:-16}" CTX="${CTX:-1024}"
models="${WEFT_MODELS_DIR:-$root/models}"
if [ $# -eq 0 ]; then
  set -- "$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" "$models/gemma-3-270m-q4_k_m.gguf"
fi
eval "$("$root/bench/build-llamacpp.sh")"

# WEFT_BIN: an already built release binary (skips the build).
if [ -z "${WEFT_BIN:-}" ]; then
  cargo build -q --release -p weft-server --bin weft
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

load() { # label
  python3 bench/server_load.py --base "$base" --model bench --concurrency "$CONC" \
    --requests-per-thread "$PER" --max-tokens "$N" | sed "s/^/$1 /"
}

run_weft() {
  # shellcheck disable=SC2086
  "$weft" serve --model "$model" --port "$port" --threads "$THREADS" --alias bench \
    ${WEFT_ARGS:-} 2>/dev/null &
  local pid=$!
  wait_ready "$base/ready"
  load "weft        "
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

run_llama() {
  # -c is the whole cache, shared by the -np slots (each gets c/np positions).
  "$LLAMACPP_BIN/llama-server" -m "$model" --port "$port" --host 127.0.0.1 -t "$THREADS" \
    -tb "$THREADS" -np "$SLOTS" -c $((SLOTS * CTX)) -a bench --no-webui >/dev/null 2>&1 &
  local pid=$!
  wait_ready "$base/health"
  load "llama-server"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

for model in "$@"; do
  echo "date: $(date -u '+%F %H:%M') UTC cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
    "threads: $THREADS model: $(basename "$model") max_tokens: $N llama-server: -np $SLOTS -c $((SLOTS * CTX))" \
    "weft: ${WEFT_ARGS:-defaults} load: $(cut -d' ' -f1-3 /proc/loadavg)"
  for _ in $(seq "$ROUNDS"); do
    run_llama
    run_weft
  done
done
