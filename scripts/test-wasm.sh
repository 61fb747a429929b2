#!/usr/bin/env bash
# Runs weft-core's wasm simd128 tests under node: the simd128 kernels (quantized dots,
# activation quantizers, f32 dot/axpy) against the portable ones, bit for bit. Builds the
# library tests for wasm32-unknown-unknown, release, with +simd128 (the profile, target and
# flags of scripts/build-web.sh, so the dependencies it built are reused) and runs them with
# wasm-bindgen-test-runner. Installs the wasm target and, when missing, wasm-bindgen-cli at
# the Cargo.lock version (the runner comes with it; ~10-15 min once, shared with
# build-web.sh). Arguments filter tests (default: the simd128 ones).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"

command -v node >/dev/null || { echo "test-wasm: node is required to run the wasm tests" >&2; exit 1; }
version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
[ -n "$version" ] || { echo "test-wasm: no wasm-bindgen in Cargo.lock" >&2; exit 1; }
if ! wasm-bindgen-test-runner --version 2>/dev/null | grep -qx "wasm-bindgen-test-runner $version"; then
  echo "test-wasm: installing wasm-bindgen-cli $version (once; ~10-15 min)" >&2
  cargo install wasm-bindgen-cli --version "$version"
fi
rustup target list --installed | grep -q '^wasm32-unknown-unknown$' || rustup target add wasm32-unknown-unknown

export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+simd128" \
  cargo test --release -p weft-core --target wasm32-unknown-unknown --lib -- "${@:-simd128}"
