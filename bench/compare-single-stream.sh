#!/usr/bin/env bash
# One stream: the engine alone (`weft bench`, `weft run`) against the same generation through
# `weft serve` (bench/single_stream.py), same model, threads and greedy decoding, run one after
# the other ROUNDS times. The gap between them is the server's share of a single stream.
# Usage: bench/compare-single-stream.sh [MODEL.gguf]  (default: SmolLM2-135M-Instruct Q4_1)
# Env: WEFT_BIN (a built release binary), THREADS (2), N (64 tokens), ROUNDS (2),
#      PARALLEL (16, as bench/compare-server.sh), REQ (3 requests per round)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"
THREADS="${THREADS:-2}" N="${N:-64}" ROUNDS="${ROUNDS:-2}" PARALLEL="${PARALLEL:-16}" REQ="${REQ:-3}"
model="${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
if [ -z "${WEFT_BIN:-}" ]; then
  cargo build -q --release -p weft-server
fi
weft="${WEFT_BIN:-$CARGO_TARGET_DIR/release/weft}"
port=$((20000 + RANDOM % 20000))
base="http://127.0.0.1:$port"

echo "date: $(date -u '+%F %T') threads: $THREADS model: $(basename "$model") tokens: $N load: $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$ROUNDS"); do
  "$weft" bench --model "$model" --threads "$THREADS" -p 16 -n "$N" -r 3 --json |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print("bench   tg t/s", round(j["gen_tokens_per_s"]["median"], 2))'
  "$weft" run --model "$model" --threads "$THREADS" --temperature 0 --ignore-eos --max-tokens "$N" \
    --prompt "Write a long story about cats." --json 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print("run     tg t/s", round(j["timings"]["gen_tokens_per_s"], 2))'
  "$weft" serve --model "$model" --port "$port" --threads "$THREADS" --parallel "$PARALLEL" --ctx 512 \
    --alias bench 2>/dev/null &
  pid=$!
  for _ in $(seq 600); do curl -sf "$base/ready" >/dev/null 2>&1 && break; sleep 0.5; done
  python3 bench/single_stream.py --base "$base" --model bench --requests "$REQ" --max-tokens "$N" |
    sed 's/^/serve   /'
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
