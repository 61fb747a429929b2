#!/usr/bin/env bash
# Code sandbox benchmark (docs/benchmarks.md): cold start (compiling python.wasm / quickjs.wasm),
# start from the .cwasm cache, warm print(1) in Python and JavaScript, and a CPU-bound script in
# the sandbox against native python3. Fetches the runtimes first (scripts/fetch-sandbox.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"
scripts/fetch-sandbox.sh >&2
cargo build -q --release -p weft-sandbox --example sandbox_bench
echo "$(date -u +%Y-%m-%d\ %H:%M) UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$CARGO_TARGET_DIR/release/examples/sandbox_bench"
