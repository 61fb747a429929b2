#!/usr/bin/env bash
# Runs llama.cpp (through llama-cpp-python, built from source once and cached outside the clone)
# and `weft bench` alternately on the same model, threads and sizes, and prints the ratios.
# Usage: bench/compare-llamacpp.sh [MODEL.gguf ...]   (default: the three reference models)
# Env: THREADS (2), P (512), N (128), R (5), ROUNDS (2: alternations of the two engines),
#      WEFT (a weft binary to use instead of building one)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"
THREADS="${THREADS:-2}" P="${P:-512}" N="${N:-128}" R="${R:-5}" ROUNDS="${ROUNDS:-2}"
venv="$HOME/.cache/weft/llamacpp-venv"
wheels="$HOME/.cache/weft/llamacpp-wheels"

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import llama_cpp" 2>/dev/null; then
  echo "compare: building llama-cpp-python 0.3.36 from source (once; ~10-20 min on 2 cores)" >&2
  python3 -m venv "$venv"
  mkdir -p "$wheels"
  ls "$wheels"/llama_cpp_python-*.whl >/dev/null 2>&1 ||
    CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_OPENMP=ON" "$venv/bin/pip" wheel -q --no-deps -w "$wheels" llama-cpp-python==0.3.36
  "$venv/bin/pip" install -q "$wheels"/llama_cpp_python-*.whl numpy typing-extensions diskcache jinja2
fi

if [ -n "${WEFT:-}" ]; then
  weft="$WEFT"
else
  cargo build -q --release -p weft-server
  weft="$CARGO_TARGET_DIR/release/weft"
fi
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  scripts/fetch-models.sh
  models=(models/gemma-3-270m-q4_k_m.gguf models/SmolLM2-135M-Instruct.Q4_1.gguf models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf)
fi

echo "date: $(date -u '+%F %H:%M') load: $(cut -d' ' -f1-3 /proc/loadavg) cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) threads: $THREADS p: $P n: $N r: $R"
printf '%-45s %-10s %12s %12s %10s\n' model engine "pp t/s" "tg t/s" "RSS MB"
for m in "${models[@]}"; do
  for round in $(seq "$ROUNDS"); do
    l=$("$venv/bin/python" bench/llamacpp_bench.py --model "$m" --threads "$THREADS" -p "$P" -n "$N" -r "$R")
    w=$("$weft" bench --model "$m" --threads "$THREADS" -p "$P" -n "$N" -r "$R" --json)
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
    python3 - "$m" "$l" "$w" <<'PY'
import json, os, sys
m, l, w = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
name = os.path.basename(m)[:45]
for eng, d in (("llama.cpp", l), ("weft", w)):
    print(f"{name:<45} {eng:<10} {d['prompt_tokens_per_s']['median']:12.1f} {d['gen_tokens_per_s']['median']:12.1f} {d['peak_rss_bytes']/1e6:10.0f}")
pp = w['prompt_tokens_per_s']['median'] / l['prompt_tokens_per_s']['median']
tg = w['gen_tokens_per_s']['median'] / l['gen_tokens_per_s']['median']
print(f"{name:<45} {'ratio':<10} {pp:12.2f} {tg:12.2f}   (weft / llama.cpp)")
PY
  done
done
