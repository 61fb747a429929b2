#!/usr/bin/env bash
# Runs the whole test suite: installs what the tests need (Python oracles, the wasm target,
# the reference models), then `cargo test --workspace`. Safe to run again: finished steps are skipped.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"

if ! python3 -c "import numpy, gguf, jinja2" 2>/dev/null; then
  python3 -m pip install -q -r scripts/requirements-test.txt
fi
scripts/fetch-models.sh
cargo test --workspace "$@"
