#!/usr/bin/env bash
# Cross-checks `weft quantize` against llama.cpp's `llama-quantize` on the reference models
# (not run by CI: it needs the llama.cpp build from bench/build-llamacpp.sh, ~25 min once).
#
# For SmolLM2 (Q4_1) and Qwen2.5-Coder (Q4_K_M), to Q8_0, Q4_0 and Q4_K_M:
#   1. both tools requantize the shipped file (--allow-requantize), and both quantize an F16
#      made from it by llama-quantize (the clean source);
#   2. the outputs are compared byte for byte, and tensor by tensor / block by block where
#      they differ (scripts/quantize_check.py same);
#   3. gguf-py dequantizes every tensor of Weft's outputs against the source within the
#      format's bound (scripts/quantize_check.py bound);
#   4. llama.cpp loads every Weft output and its greedy tokens on the reference prompts are
#      compared with Weft's on the same file, up to the first near-tie (bench/greedy_compare.py).
# Results are printed as JSON lines; docs/quantize.md records a run.
#
# Usage: bench/check-quantize.sh [OUT_DIR]   (default /tmp/weft-quantize-check)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
eval "$(bench/build-llamacpp.sh)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"
models="${WEFT_MODELS_DIR:-$root/models}"
out="${1:-/tmp/weft-quantize-check}"
threads="${THREADS:-2}"
mkdir -p "$out"
cargo build -q --release -p weft-server --bin weft
weft="$CARGO_TARGET_DIR/release/weft"
lq="$LLAMACPP_BIN/llama-quantize"
declare -A src=(
  [smollm2]="$models/SmolLM2-135M-Instruct.Q4_1.gguf"
  [qwen2]="$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
)
for key in smollm2 qwen2; do
  f16="$out/$key.f16.gguf"
  [ -f "$f16" ] || "$lq" --allow-requantize "${src[$key]}" "$f16" F16 "$threads" >"$out/$key.f16.log" 2>&1
  for from in shipped f16; do
    input="${src[$key]}"; [ "$from" = f16 ] && input="$f16"
    for ty in Q8_0 Q4_0 Q4_K_M; do
      base="$out/$key.$from.$ty"
      "$lq" --allow-requantize "$input" "$base.llama.gguf" "$ty" "$threads" >"$base.llama.log" 2>&1
      "$weft" quantize "$input" "$base.weft.gguf" "$(echo "$ty" | tr 'A-Z' 'a-z')" --allow-requantize --threads "$threads" >"$base.weft.log" 2>&1
      same=$(cmp -s "$base.llama.gguf" "$base.weft.gguf" && echo true || echo false)
      tensors=$(python3 scripts/quantize_check.py same "$base.llama.gguf" "$base.weft.gguf")
      bound=$(python3 scripts/quantize_check.py bound "$input" "$base.weft.gguf" || true)
      greedy=$(PYTHONPATH="$LLAMACPP_PYTHONPATH" python3 bench/greedy_compare.py "$weft" "$base.weft.gguf" "tests/reference/$( [ $key = smollm2 ] && echo smollm2-135m || echo qwen2.5-coder-0.5b ).dev.json")
      echo "{\"model\": \"$key\", \"from\": \"$from\", \"type\": \"$ty\", \"file_identical\": $same, \"tensors\": $tensors, \"bound\": $bound, \"greedy\": $greedy}"
    done
  done
done
