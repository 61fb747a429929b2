#!/usr/bin/env bash
# Builds the browser package: weft-wasm for wasm32 (release, simd128 for the CPU fallback),
# then wasm-bindgen --target web into web/pkg/ (ES module, .wasm, .d.ts), plus the JS API
# (weft.js, its worker, weft.d.ts) and a package.json, so another page can import web/pkg/
# (snippets/ holds the JS the wasm imports: browser features wgpu does not pass through).
# Installs wasm-bindgen-cli at the exact wasm-bindgen version of Cargo.lock when it is missing
# (about 10-15 minutes the first time). Prints the .wasm size.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weft/target}"
profile="${WEFT_WEB_PROFILE:-release}"

version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
[ -n "$version" ] || { echo "build-web: no wasm-bindgen in Cargo.lock" >&2; exit 1; }
if ! wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $version"; then
  echo "build-web: installing wasm-bindgen-cli $version (once; ~10-15 min)" >&2
  # No --locked: the CLI's own lockfile pins a crate version the registry no longer serves.
  cargo install wasm-bindgen-cli --version "$version"
fi
rustup target list --installed | grep -q '^wasm32-unknown-unknown$' || rustup target add wasm32-unknown-unknown

flags=(--target wasm32-unknown-unknown -p weft-wasm)
[ "$profile" = release ] && flags+=(--release)
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+simd128" cargo build "${flags[@]}"

out=web/pkg
rm -rf "$out"
mkdir -p "$out"
wasm-bindgen --target web --out-dir "$out" "$CARGO_TARGET_DIR/wasm32-unknown-unknown/$profile/weft_wasm.wasm"
cp web/js/weft.js web/js/weft-worker.js web/js/weft.d.ts "$out/"
crate_version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
cat > "$out/package.json" <<JSON
{
  "name": "weft-web",
  "version": "$crate_version",
  "description": "Weft LLM inference in the browser (WebGPU, or the CPU with wasm SIMD)",
  "type": "module",
  "main": "weft.js",
  "module": "weft.js",
  "types": "weft.d.ts",
  "files": ["weft.js", "weft.d.ts", "weft-worker.js", "weft_wasm.js", "weft_wasm.d.ts", "weft_wasm_bg.wasm", "weft_wasm_bg.wasm.d.ts", "snippets"],
  "sideEffects": false,
  "license": "Apache-2.0"
}
JSON
size=$(stat -c %s "$out/weft_wasm_bg.wasm")
echo "build-web: $out/weft_wasm_bg.wasm is $size bytes ($(( size / 1024 )) KiB)"
