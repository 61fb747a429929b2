#!/usr/bin/env bash
# Quantize throughput, Weft next to llama.cpp's llama-quantize, in one run: the same F16 input
# (made by llama-quantize from the reference model), the same thread count, alternating runs;
# prints a markdown table of the median wall time and MB/s (input bytes / seconds).
#
# Usage: bench/quantize-bench.sh [MODEL_KEY=qwen2] [THREADS=2] [REPS=3]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
eval "$(bench/build-llamacpp.sh)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"
models="${WEFT_MODELS_DIR:-$root/models}"
key="${1:-qwen2}"; threads="${2:-2}"; reps="${3:-3}"
case "$key" in
  smollm2) src="$models/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
  qwen2) src="$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" ;;
  *) echo "unknown model key $key" >&2; exit 2 ;;
esac
cargo build -q --release -p weft-server --bin weft
weft="$CARGO_TARGET_DIR/release/weft"
lq="$LLAMACPP_BIN/llama-quantize"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
f16="$tmp/in.f16.gguf"
"$lq" --allow-requantize "$src" "$f16" F16 "$threads" >/dev/null 2>&1
mb=$(python3 -c "import os,sys; print(os.path.getsize(sys.argv[1]) / 1e6)" "$f16")
now() { date +%s.%N; }
median() { python3 -c "import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
echo "| type | input | threads | llama-quantize s | MB/s | weft quantize s | MB/s | weft / llama.cpp |"
echo "|---|---|---|---|---|---|---|---|"
for ty in Q8_0 Q4_0 Q4_K_M Q6_K; do
  lt=(); wt=()
  for _ in $(seq "$reps"); do
    t0=$(now); "$lq" "$f16" "$tmp/l.gguf" "$ty" "$threads" >/dev/null 2>&1; t1=$(now)
    "$weft" quantize "$f16" "$tmp/w.gguf" "$ty" --threads "$threads" >/dev/null 2>&1; t2=$(now)
    lt+=("$(echo "$t1 - $t0" | bc)"); wt+=("$(echo "$t2 - $t1" | bc)")
  done
  l=$(median "${lt[@]}"); w=$(median "${wt[@]}")
  python3 -c "
import sys
ty,mb,th,l,w=sys.argv[1],float(sys.argv[2]),sys.argv[3],float(sys.argv[4]),float(sys.argv[5])
print(f'| {ty} | {mb:.0f} MB F16 | {th} | {l:.2f} | {mb/l:.0f} | {w:.2f} | {mb/w:.0f} | {l/w:.2f}x |')
" "$ty" "$mb" "$threads" "$l" "$w"
done
