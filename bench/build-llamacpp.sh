#!/usr/bin/env bash
# Builds llama.cpp once, outside the clone, as the comparison anchor for every benchmark and
# cross-check: the C++ tools (llama-server, llama-quantize, llama-embedding, llama-cli,
# llama-bench, llama-mtmd-cli) and its shared libraries (libllama, libmtmd), from the llama.cpp vendored in the llama-cpp-python
# 0.3.36 sdist (from PyPI), plus that sdist's pure-Python `llama_cpp` bindings pointed at the
# same libraries (no second build).
#
# Prints the variables to use, e.g. `eval "$(bench/build-llamacpp.sh)"`:
#   LLAMACPP_BIN         folder with llama-server, llama-quantize, ...
#   LLAMA_CPP_LIB_PATH   folder with libllama.so (what llama_cpp's ctypes loader reads)
#   LLAMACPP_PYTHONPATH  folder to put on PYTHONPATH for `import llama_cpp`
#
# CPU flags are explicit: on CPUs that advertise AMX, GGML_NATIVE=ON emits AMX tile
# instructions that this VM refuses with SIGILL, so each AVX/AVX-512 set this CPU reports is
# named and AMX left off. The flags are recorded in $dir/FLAGS. Idempotent: a finished build
# with the same flags is reused.
set -euo pipefail
dir="${LLAMACPP_DIR:-$HOME/.cache/weft/llamacpp}"
version=0.3.36
mkdir -p "$dir"
cd "$dir"

# Each instruction set on only when this CPU reports it (/proc/cpuinfo): e.g. AMD Zen 4 has
# AVX512-VNNI but not the VEX-encoded AVX-VNNI, and a build with GGML_AVX_VNNI=ON dies there
# with SIGILL.
has() { grep -qw "$1" /proc/cpuinfo; }
on() { if has "$2"; then echo "-D$1=ON"; else echo "-D$1=OFF"; fi; }
flags=(-DGGML_NATIVE=OFF
  "$(on GGML_AVX avx)" "$(on GGML_AVX2 avx2)" "$(on GGML_FMA fma)" "$(on GGML_F16C f16c)"
  "$(on GGML_BMI2 bmi2)" "$(on GGML_AVX_VNNI avx_vnni)" "$(on GGML_AVX512 avx512f)"
  "$(on GGML_AVX512_VBMI avx512vbmi)" "$(on GGML_AVX512_VNNI avx512_vnni)"
  "$(on GGML_AVX512_BF16 avx512_bf16)" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
  -DGGML_OPENMP=ON -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release)

bin="$dir/build/bin"
# A build made with other flags (another CPU, or an older version of this script) is redone.
# llama-mtmd-cli (and libmtmd) are the reference for vision input (scripts/vision/); a build
# from before they were added is completed (ninja rebuilds only what is missing).
if [ ! -x "$bin/llama-server" ] || [ ! -x "$bin/llama-quantize" ] || [ ! -x "$bin/llama-mtmd-cli" ] ||
  [ ! -f "$dir/DONE" ] ||
  [ "$(cat "$dir/FLAGS" 2>/dev/null)" != "$(printf '%s\n' "${flags[@]}")" ]; then
  {
    command -v cmake >/dev/null && command -v ninja >/dev/null ||
      python3 -m pip install -q --disable-pip-version-check cmake ninja
    if [ ! -f "llama_cpp_python-$version.tar.gz" ]; then
      # The sdist only (no build): it vendors llama.cpp under vendor/llama.cpp. pip still reads
      # its metadata through the build backend; without it installed here, pip would build one
      # in isolation (with --no-binary, cmake itself from source).
      python3 -c "import scikit_build_core" 2>/dev/null ||
        python3 -m pip install -q --disable-pip-version-check scikit-build-core
      python3 -m pip download -q --disable-pip-version-check --no-deps --no-build-isolation \
        --no-binary=:all: "llama-cpp-python==$version" -d .
    fi
    if [ ! -f src/vendor/llama.cpp/CMakeLists.txt ]; then
      rm -rf src && mkdir src
      tar -xzf "llama_cpp_python-$version.tar.gz" -C src --strip-components=1
    fi
    echo "building llama.cpp (vendored in llama-cpp-python $version) in $dir; ~25 min on 2 cores" >&2
    cmake -S src/vendor/llama.cpp -B build -G Ninja "${flags[@]}" >build.log 2>&1
    cmake --build build -j"$(nproc)" --target llama-server llama-quantize llama-embedding \
      llama-cli llama-bench llama llama-mtmd-cli mtmd >>build.log 2>&1 || { tail -40 build.log; exit 1; }
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
