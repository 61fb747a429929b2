#!/usr/bin/env bash
# GPU check for the wgpu backend, for a machine with a real GPU (run from the repo root):
#   1. builds weft (release),
#   2. lists the adapters (`weft devices`),
#   3. runs the WGSL validation, the wgpu kernel parity tests and the end-to-end reference tests,
#   4. runs `weft bench --backend wgpu` (or a greedy `weft run --json` when bench is absent)
#      on the three reference models and prints tokens/s and the
#      fraction of the memory-bandwidth limit (a decode step reads every weight once, so the
#      limit is bandwidth / model bytes).
# Environment: BANDWIDTH_GBS (peak memory bandwidth in GB/s; guessed from nvidia-smi for common
# GPUs when unset), GPU_DEVICE (adapter index, default: the default adapter), WEFT_MODELS_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
chmod 700 "$XDG_RUNTIME_DIR"
MODELS="${WEFT_MODELS_DIR:-models}"
DEV_ARGS=()
if [[ -n "${GPU_DEVICE:-}" ]]; then DEV_ARGS=(--gpu-device "$GPU_DEVICE"); fi

echo "== build"
cargo build --release -p weft-server --bin weft
WEFT=target/release/weft
if [[ -n "${CARGO_TARGET_DIR:-}" ]]; then WEFT="$CARGO_TARGET_DIR/release/weft"; fi

echo "== adapters"
"$WEFT" devices

echo "== shader validation, kernel parity, reference models (wgpu)"
cargo test --release -p weft-shaders
cargo test --release -p weft-core --test wgpu_parity --test wgpu_reference -- --test-threads 1

if [[ -z "${BANDWIDTH_GBS:-}" ]] && command -v nvidia-smi >/dev/null; then
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
    *H200*) BANDWIDTH_GBS=4800 ;;
    *H100*SXM*|*H100\ 80GB\ HBM3*) BANDWIDTH_GBS=3350 ;;
    *H100*) BANDWIDTH_GBS=2000 ;;
    *A100*80GB*) BANDWIDTH_GBS=2039 ;;
    *A100*) BANDWIDTH_GBS=1555 ;;
    *L40S*|*L40*) BANDWIDTH_GBS=864 ;;
    *4090*) BANDWIDTH_GBS=1008 ;;
    *A10*) BANDWIDTH_GBS=600 ;;
    *T4*) BANDWIDTH_GBS=320 ;;
  esac
fi

echo "== decode speed (weft bench --backend wgpu)"
printf '%-42s %12s %12s %10s\n' model "prompt t/s" "decode t/s" "of BW"
for f in SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf qwen2.5-coder-0.5b-instruct-q4_k_m.gguf; do
  path="$MODELS/$f"
  if [[ ! -f "$path" ]]; then echo "missing $path (scripts/fetch-models.sh)"; continue; fi
  if "$WEFT" bench --help >/dev/null 2>&1; then
    json=$("$WEFT" bench --model "$path" --backend wgpu "${DEV_ARGS[@]}" --json)
  else
    # No `weft bench` in this build: a greedy 128-token generation from a fixed raw prompt.
    json=$("$WEFT" run --model "$path" --backend wgpu "${DEV_ARGS[@]}" --json --raw \
      --prompt "The history of the printing press begins" --max-tokens 128 --ignore-eos \
      --temperature 0)
  fi
  python3 - "$path" "$json" "${BANDWIDTH_GBS:-0}" <<'PY'
import json, os, sys
path, text, bw = sys.argv[1], sys.argv[2], float(sys.argv[3])
r = json.loads(text.strip().splitlines()[-1])
r = r.get("timings", r)
pp = r.get("prompt_tokens_per_s", 0.0)
tg = r.get("gen_tokens_per_s", 0.0)
size = os.path.getsize(path)
frac = f"{tg * size / (bw * 1e9):.1%}" if bw > 0 else "n/a"
print(f"{os.path.basename(path):42s} {pp:12.1f} {tg:12.1f} {frac:>10s}")
PY
done
