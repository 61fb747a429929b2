#!/usr/bin/env bash
# Runs the whole test suite: installs what the tests need (Python oracles, the reference models,
# the code sandbox's python.wasm / quickjs.wasm (scripts/fetch-sandbox.sh),
# the browser package in web/pkg and playwright-core for the browser test), then
# `cargo test --workspace`, then the wasm simd128 kernel tests under node (scripts/test-wasm.sh).
# Safe to run again: finished steps are skipped. Chromium itself comes from the system
# (Debian's `chromium`); where it is missing the browser test skips, loudly (fails under CI).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"

# pip is quick when everything is already installed at the pinned versions.
python3 -m pip install -q --disable-pip-version-check -r scripts/requirements-test.txt 2>&1 | grep -v "Running pip as the 'root' user" || true
scripts/fetch-models.sh
scripts/fetch-sandbox.sh
scripts/build-web.sh
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
fi
# NVRTC from the nvidia-cuda-nvrtc-cu12 wheel, for the CUDA kernel compile test (cuda-ext).
if [ -z "${WEFT_NVRTC_PATH:-}" ]; then
  WEFT_NVRTC_PATH="$(python3 -c 'import nvidia.cuda_nvrtc as m; print(list(m.__path__)[0] + "/lib")' 2>/dev/null || true)"
  export WEFT_NVRTC_PATH
fi
cargo test --workspace "$@"
scripts/test-wasm.sh
