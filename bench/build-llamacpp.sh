#!/usr/bin/env bash
# Builds llama.cpp once, outside the clone, as the comparison anchor for every benchmark and
# cross-check: the C++ tools (llama-server, llama-quantize, llama-embedding, llama-cli,
# llama-bench) and its shared libraries, from the llama.cpp vendored in the llama-cpp-python
# 0.3.36 sdist (from PyPI), plus that sdist's pure-Python `llama_cpp` bindings pointed at the
# same libraries (no second build).
#
# Prints the variables to use, e.g. `eval "$(bench/build-llamacpp.sh)"`:
#   LLAMACPP_BIN         folder with llama-server, llama-quantize, ...
#   LLAMA_CPP_LIB_PATH   folder with libllama.so (what llama_cpp's ctypes loader reads)
#   LLAMACPP_PYTHONPATH  folder to put on PYTHONPATH for `import llama_cpp`
#
# CPU flags are explicit: on CPUs that advertise AMX, GGML_NATIVE=ON emits AMX tile
# instructions that this VM refuses with SIGILL, so AVX-512 (VNNI, VBMI, BF16) is named and AMX
# left off. The flags are recorded in $dir/FLAGS. Idempotent: a finished build is reused.
set -euo pipefail
dir="${LLAMACPP_DIR:-$HOME/.cache/weft/llamacpp}"
version=0.3.36
mkdir -p "$dir"
cd "$dir"

flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
  -DGGML_AVX_VNNI=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON
  -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
  -DGGML_OPENMP=ON -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release)

bin="$dir/build/bin"
if [ ! -x "$bin/llama-server" ] || [ ! -x "$bin/llama-quantize" ] || [ ! -f "$dir/DONE" ]; then
  {
    command -v cmake >/dev/null && command -v ninja >/dev/null ||
      python3 -m pip install -q --disable-pip-version-check cmake ninja
    if [ ! -f "llama_cpp_python-$version.tar.gz" ]; then
      # The sdist only (no build): it vendors llama.cpp under vendor/llama.cpp.
      python3 -m pip download -q --disable-pip-version-check --no-deps --no-build-isolation \
        --no-binary=:all: "llama-cpp-python==$version" -d .
    fi
    rm -rf src && mkdir src
    tar -xzf "llama_cpp_python-$version.tar.gz" -C src --strip-components=1
    echo "building llama.cpp (vendored in llama-cpp-python $version) in $dir; ~25 min on 2 cores" >&2
    cmake -S src/vendor/llama.cpp -B build -G Ninja "${flags[@]}" >build.log 2>&1
    cmake --build build -j"$(nproc)" --target llama-server llama-quantize llama-embedding \
      llama-cli llama-bench llama >>build.log 2>&1 || { tail -40 build.log; exit 1; }
    printf '%s\n' "${flags[@]}" >FLAGS
    touch DONE
  } >&2
fi
# The bindings' pure-Python dependencies (llama_cpp imports diskcache at import time).
python3 -c "import diskcache, jinja2, numpy, typing_extensions" 2>/dev/null ||
  python3 -m pip install -q --disable-pip-version-check diskcache jinja2 numpy typing-extensions >&2
# libllama.so and libggml*.so land in build/bin with BUILD_SHARED_LIBS.
lib="$bin"
[ -f "$lib/libllama.so" ] || lib="$(dirname "$(find "$dir/build" -name libllama.so | head -1)")"
echo "export LLAMACPP_BIN=$bin"
echo "export LLAMA_CPP_LIB_PATH=$lib"
echo "export LLAMACPP_PYTHONPATH=$dir/src"
