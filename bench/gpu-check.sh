#!/usr/bin/env bash
# GPU check for the CUDA and wgpu backends, for a machine with an NVIDIA GPU and no Rust, no
# network and little disk: it runs a release `weft` built elsewhere (docs/cuda.md says how).
#   1. lists the devices (`weft devices`: CUDA devices, then wgpu adapters);
#   2. `weft parity`: every weight type's products (decode and batched) against the CPU's;
#   3. for each model: greedy decode, 32 steps, on cpu, cuda and wgpu (the token ids must equal
#      the CPU's; cuda also with WEFT_CUDA_GRAPHS=0, which must give its own ids), then `weft bench` prompt and decode speed on cuda and wgpu, with the share of
#      the memory-bandwidth roofline (a decode step reads every weight once: bandwidth / bytes).
# The models are written here by `weft synth` (random weights at SmolLM2-135M, Qwen2.5-0.5B and
# Qwen2.5-7B shapes, in each of SYNTH_TYPES), one at a time into a temporary folder and deleted
# after their checks, so the disk needs room for one (7B: 8 GB at q8_0, 15 GB at f16); then any
# GGUF files in WEFT_MODELS_DIR, then its embedding model folders (CUDA's vectors vs the CPU's).
# Usage: bench/gpu-check.sh [WEFT_BINARY] (default: ./weft, then target/release/weft)
# Environment: WEFT_MODELS_DIR (more GGUF files; default models/), SYNTH_SIZES (default
# "smollm2 qwen0.5b 7b"; empty for none), SYNTH_TYPES (default "q8_0 q4_k f16"), SYNTH_DIR
# (where to write them; default a new temporary folder), GPU_DEVICE (index among the CUDA
# devices), BANDWIDTH_GBS (peak memory bandwidth; guessed from nvidia-smi when unset),
# WEFT_NVRTC_PATH (NVRTC's lib folder when libnvrtc.so.12 is not on the loader path).
set -uo pipefail
WEFT="${1:-}"
# The binary's path is taken from where the caller stands, before the cd below.
if [[ -n "$WEFT" && "$WEFT" != /* ]]; then WEFT="$PWD/$WEFT"; fi
cd "$(dirname "$0")/.."

if [[ -z "$WEFT" ]]; then
  if [[ -x ./weft ]]; then WEFT=./weft; else WEFT=target/release/weft; fi
fi
MODELS="${WEFT_MODELS_DIR:-models}"
# NVRTC: weft looks for libnvrtc.so.12 or libnvrtc.so. A CUDA 13 toolkit has only
# libnvrtc.so.13 on no default path; its API serves weft's kernels too (H200, 2026-12-04), so
# it is offered under both names from a folder of links, with its own folder (the builtins
# library) on the loader path.
if [[ -z "${WEFT_NVRTC_PATH:-}" ]] && ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so\.12 '; then
  nvrtc=$(ls /usr/local/cuda*/lib64/libnvrtc.so.1[2-9]* /usr/local/cuda*/targets/*/lib/libnvrtc.so.1[2-9]* 2>/dev/null \
    | grep -v builtins | head -1)
  if [[ -n "$nvrtc" ]]; then
    links=$(mktemp -d)
    ln -s "$(readlink -f "$nvrtc")" "$links/libnvrtc.so.12"
    ln -s "$(readlink -f "$nvrtc")" "$links/libnvrtc.so"
    export WEFT_NVRTC_PATH="$links"
    export LD_LIBRARY_PATH="$links:$(dirname "$(readlink -f "$nvrtc")")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "NVRTC: $nvrtc"
  fi
fi
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
chmod 700 "$XDG_RUNTIME_DIR"
DEV=()
if [[ -n "${GPU_DEVICE:-}" ]]; then DEV=(--gpu-device "$GPU_DEVICE"); fi
fail=0

echo "== devices"
"$WEFT" devices

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
    *L4*) BANDWIDTH_GBS=300 ;;
    *T4*) BANDWIDTH_GBS=320 ;;
  esac
fi

echo "== products vs the CPU (weft parity), at a 0.5B model's width and at a 7B's"
for b in cuda wgpu; do
  for shape in "--rows 896 --cols 4864" "--rows 4096 --cols 4096"; do
    echo "-- $b $shape"
    # shellcheck disable=SC2086
    "$WEFT" parity --backend "$b" "${DEV[@]}" $shape || fail=1
  done
done

PROMPT="The history of the printing press begins"
greedy() { # model backend -> the 32 greedy token ids as one line, or ERROR: ...
  local out
  if out=$("$WEFT" run --model "$1" --backend "$2" "${@:3}" --json --raw --prompt "$PROMPT" \
      --max-tokens 32 --ignore-eos --temperature 0 2>&1); then
    python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["tokens"])' <<<"$out"
  else
    echo "ERROR: $(tail -1 <<<"$out")"
  fi
}

check() { # model -> greedy ids vs the CPU's, then speed (weft bench -p 512 -n 128)
  local m=$1 cpu got r json
  echo "== $(basename "$m") ($(du -h "$m" | cut -f1))"
  cpu=$(greedy "$m" cpu)
  for b in cuda wgpu; do
    got=$(greedy "$m" "$b" "${DEV[@]}")
    if [[ "$got" == "$cpu" ]]; then r=same; else r="DIFFERENT: $got (cpu: $cpu)"; fail=1; fi
    printf '  greedy 32 steps %-5s vs cpu: %s\n' "$b" "$r"
  done
  # Decode steps replay CUDA graphs from the second step of a shape on; without graphs every
  # kernel is launched from the host. Both split attention alike, so the ids must be equal.
  got=$(WEFT_CUDA_GRAPHS=0 greedy "$m" cuda "${DEV[@]}")
  cuda=$(greedy "$m" cuda "${DEV[@]}")
  if [[ "$got" == "$cuda" && "$got" != ERROR* ]]; then r=same; else r="DIFFERENT: $got (graphs: $cuda)"; fail=1; fi
  printf '  greedy 32 steps cuda without graphs vs with: %s\n' "$r"
  printf '  %-5s %12s %12s %8s\n' backend "prompt t/s" "decode t/s" "of BW"
  for b in cuda wgpu; do
    if ! json=$("$WEFT" bench --model "$m" --backend "$b" "${DEV[@]}" -r 2 --json 2>&1); then
      printf '  %-5s %s\n' "$b" "ERROR: $(tail -1 <<<"$json")"; fail=1; continue
    fi
    python3 - "$m" "$b" "$json" "${BANDWIDTH_GBS:-0}" <<'PY'
import json, os, sys
path, backend, text, bw = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
r = json.loads(text[text.index("{"):])
med = lambda v: (v or {}).get("median", 0.0) if isinstance(v, dict) else (v or 0.0)
pp, tg = med(r.get("prompt_tokens_per_s")), med(r.get("gen_tokens_per_s"))
frac = f"{tg * os.path.getsize(path) / (bw * 1e9):.1%}" if bw > 0 else "n/a"
print(f"  {backend:5s} {pp:12.1f} {tg:12.1f} {frac:>8s}")
PY
  done
}

SYNTH_SIZES="${SYNTH_SIZES-smollm2 qwen0.5b 7b}"
SYNTH_TYPES="${SYNTH_TYPES-q8_0 q4_k f16}"
if [[ -n "${SYNTH_DIR:-}" ]]; then
  mkdir -p "$SYNTH_DIR"
else
  SYNTH_DIR=$(mktemp -d)
  trap 'rm -rf "$SYNTH_DIR"' EXIT
fi
for size in $SYNTH_SIZES; do
  for ty in $SYNTH_TYPES; do
    m="$SYNTH_DIR/synth-$size-$ty.gguf"
    if ! err=$("$WEFT" synth --size "$size" --type "$ty" --seed 1 -o "$m" 2>&1); then
      echo "== synth $size $ty: ERROR: $(tail -1 <<<"$err")"; fail=1; rm -f "$m"; continue
    fi
    check "$m"
    rm -f "$m"
  done
done

shopt -s nullglob
for m in "$MODELS"/*.gguf; do
  check "$m"
done

# Embedding models (Hugging Face folders in WEFT_MODELS_DIR, such as all-MiniLM-L6-v2): the
# CUDA encoder's vectors against the CPU's. The products and attention sum in another order, so
# the vectors agree to a cosine similarity, not bit for bit.
for m in "$MODELS"/*/; do
  [[ -f "$m/config.json" ]] || continue
  echo "== embeddings $(basename "$m")"
  texts=("The history of the printing press begins" "Weft runs models on the GPU." "a")
  for b in cpu cuda; do
    if ! out=$("$WEFT" embed --model "$m" --backend "$b" "${DEV[@]}" --json "${texts[@]}" 2>&1); then
      echo "  $b: ERROR: $(tail -1 <<<"$out")"; fail=1; continue 2
    fi
    printf '%s' "$out" >"$XDG_RUNTIME_DIR/embed-$b.json"
  done
  python3 - "$XDG_RUNTIME_DIR/embed-cpu.json" "$XDG_RUNTIME_DIR/embed-cuda.json" <<'PY' || fail=1
import json, math, sys
load = lambda p: json.loads(open(p).read().strip().splitlines()[-1])["embeddings"]
a, b = load(sys.argv[1]), load(sys.argv[2])
worst = 1.0
for x, y in zip(a, b):
    dot = sum(p * q for p, q in zip(x, y))
    cos = dot / (math.sqrt(sum(p * p for p in x)) * math.sqrt(sum(q * q for q in y)))
    worst = min(worst, cos)
diff = max(abs(p - q) for x, y in zip(a, b) for p, q in zip(x, y))
ok = len(a) == len(b) and worst > 0.9999
print(f"  cuda vs cpu: lowest cosine {worst:.7f}, largest difference {diff:.2e}: {'ok' if ok else 'DIFFERENT'}")
sys.exit(0 if ok else 1)
PY
done
exit $fail
