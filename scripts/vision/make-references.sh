#!/usr/bin/env bash
# Rebuilds the vision reference kit in tests/data/vision/ from nothing: the five test images,
# the tiny random-weight vision models (transformers), their GGUFs (llama.cpp's own
# convert_hf_to_gguf.py), and the reference outputs of llama.cpp's mtmd and of transformers.
# Tests read only the committed files; this script needs PyTorch and a llama.cpp build, CI
# does not run it.
#
# usage: scripts/vision/make-references.sh [FAMILY ...]   (default: gemma3 qwen25vl idefics3)
#
# Needs: python3 with pip (PyPI reachable), a C++17 compiler, cmake/ninja (installed by
# bench/build-llamacpp.sh). Uses:
#   bench/build-llamacpp.sh          llama.cpp from the llama-cpp-python 0.3.36 sdist, with
#                                    libmtmd and llama-mtmd-cli
#   scripts/fetch-models.sh          the real GGUFs whose tokenizers / text model are reused
#   $WEFT_VISION_VENV                Python venv for torch + transformers
#                                    (default ~/.cache/weft/vision-venv)
#   $WEFT_VISION_WORK                scratch folder (default ~/.cache/weft/vision-work)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/scripts/vision"
data="$root/tests/data/vision"
families="${*:-gemma3 qwen25vl idefics3}"
venv="${WEFT_VISION_VENV:-$HOME/.cache/weft/vision-venv}"
work="${WEFT_VISION_WORK:-$HOME/.cache/weft/vision-work}"
models="${WEFT_MODELS_DIR:-$root/models}"
steps=32

# 1. llama.cpp (tools + libmtmd) and its converter
eval "$("$root/bench/build-llamacpp.sh")"
llama_src="$LLAMACPP_PYTHONPATH/vendor/llama.cpp"
[ -f "$llama_src/convert_hf_to_gguf.py" ] || { echo "no convert_hf_to_gguf.py in $llama_src" >&2; exit 1; }

# 2. Python: the versions llama.cpp's converter asks for (requirements-convert_hf_to_gguf.txt).
# torch from PyPI is the CUDA build: its nvidia-* wheels (~3 GB) are needed only for it to
# import; everything here runs on the CPU.
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
py="$venv/bin/python"
"$py" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt"
# the converter and gguf_vocab.py use the gguf-py vendored with this llama.cpp
export PYTHONPATH="$llama_src/gguf-py"

# 3. real models (tokenizers; Gemma 3 270M is the text model of the Gemma 3 reference)
WEFT_MODELS_DIR="$models" "$root/scripts/fetch-models.sh" gemma3 qwen2 smollm2

# 4. the dumper, against the public mtmd / llama headers and the shared libraries
mkdir -p "$work"
inc=(-I"$llama_src/include" -I"$llama_src/ggml/include" -I"$llama_src/tools/mtmd")
"${CXX:-g++}" -O2 -std=c++17 -o "$work/mtmd_ref" "$here/mtmd_ref.cpp" "${inc[@]}" \
  -L"$LLAMA_CPP_LIB_PATH" -lmtmd -lllama -lggml -lggml-base -Wl,-rpath,"$LLAMA_CPP_LIB_PATH"

# 5. test images (deterministic; JPEG bytes depend on the pinned Pillow's libjpeg)
"$py" "$here/make_images.py" "$data/images"
images=(landscape_640x480.jpg tall_300x900.png wide_1024x256.jpg square_224x224.png tiny_37x61.png)
image_paths=()
for i in "${images[@]}"; do image_paths+=("$data/images/$i"); done

convert() { "$py" "$llama_src/convert_hf_to_gguf.py" "$@" 2>&1 | tail -1; }

for fam in $families; do
  echo "== $fam"
  hf="$work/hf/$fam"
  ref="$work/ref/$fam"
  out="$data/$fam"
  rm -rf "$hf" "$ref" && mkdir -p "$hf" "$ref" "$out"
  case "$fam" in
    gemma3)
      "$py" "$here/tiny_models.py" gemma3 "$hf"
      mmproj="$out/mmproj-gemma3-tiny-f16.gguf"
      convert "$hf" --mmproj --outtype f16 --outfile "$mmproj"
      text="$models/gemma-3-270m-q4_k_m.gguf" # the real text model, 640 wide like the projector
      prompt=$'<start_of_turn>user\n<__media__>Describe this image.<end_of_turn>\n<start_of_turn>model\n'
      ;;
    qwen25vl)
      "$py" "$here/tiny_models.py" qwen25vl "$hf" "$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
      mmproj="$out/mmproj-qwen25vl-tiny-f16.gguf"
      convert "$hf" --mmproj --outtype f16 --outfile "$mmproj"
      convert "$hf" --outtype q8_0 --outfile "$work/qwen25vl-text.gguf"
      text="$out/qwen25vl-tiny-q8_0.gguf"
      "$py" "$here/gguf_vocab.py" "$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" \
        "$work/qwen25vl-text.gguf" "$text" "$hf"
      prompt=$'<|im_start|>user\n<__media__>Describe this image.<|im_end|>\n<|im_start|>assistant\n'
      ;;
    idefics3)
      "$py" "$here/tiny_models.py" idefics3 "$hf" "$models/SmolLM2-135M-Instruct.Q4_1.gguf"
      mmproj="$out/mmproj-idefics3-tiny-f16.gguf"
      convert "$hf" --mmproj --outtype f16 --outfile "$mmproj"
      convert "$hf" --outtype q8_0 --outfile "$work/idefics3-text.gguf"
      text="$out/idefics3-tiny-q8_0.gguf"
      "$py" "$here/gguf_vocab.py" "$models/SmolLM2-135M-Instruct.Q4_1.gguf" \
        "$work/idefics3-text.gguf" "$text" "$hf"
      prompt=$'<|im_start|>User:<__media__>Describe this image.<end_of_utterance>\nAssistant:'
      ;;
    *) echo "unknown family $fam" >&2; exit 2 ;;
  esac
  # weft convert's test input: the folder without its text weights, which must convert to the
  # same mmproj bytes
  "$py" "$here/convert_fixtures.py" "$hf" "$data/convert/$fam"
  convert "$data/convert/$fam" --mmproj --outtype f16 --outfile "$work/mmproj-check.gguf"
  cmp "$work/mmproj-check.gguf" "$mmproj"
  "$work/mtmd_ref" "$text" "$mmproj" "$ref" "$steps" "$prompt" "${image_paths[@]}" \
    >"$ref/mtmd.jsonl" 2>"$ref/mtmd.log" || { tail -20 "$ref/mtmd.log"; exit 1; }
  # the same greedy runs with the text model's flash attention off: a second reference for
  # the generation tests (these image prompts are sensitive to its f16 accumulation)
  mkdir -p "$ref/text_fa_off"
  MTMD_REF_TEXT_FLASH_ATTN=off "$work/mtmd_ref" "$text" "$mmproj" "$ref/text_fa_off" "$steps" \
    "$prompt" "${image_paths[@]}" >"$ref/text_fa_off/mtmd.jsonl" 2>"$ref/text_fa_off/mtmd.log" \
    || { tail -20 "$ref/text_fa_off/mtmd.log"; exit 1; }
  "$py" "$here/greedy_runs.py" "$ref/text_fa_off/mtmd.jsonl" >"$ref/greedy_text_fa_off.json"
  "$py" "$here/hf_reference.py" "$fam" "$hf" "$ref" "$data/images"
  # what is shipped: index, mtmd's and transformers' embeddings, mtmd's encoder inputs as
  # lossless PNGs, mtmd's decoded RGB as PNG (the f32 tensors and raw RGB stay in $ref)
  rm -f "$out"/*.f32 "$out"/*.png "$out/index.json" "$out/greedy_text_fa_off.json"
  cp "$ref/index.json" "$ref/greedy_text_fa_off.json" "$ref"/*.embd.f32 "$ref"/*.hf_embd.f32 "$ref"/*.pixels.*png "$ref"/*.decoded.png "$out/"
  printf '%s' "$prompt" >"$out/prompt.txt" # exactly the text given to mtmd_tokenize
  du -sh "$out"
done
du -sh "$data"
# llama.cpp's own CLI must print the same greedy text as the dumper's ids
"$py" "$here/check_mtmd_cli.py" "$LLAMACPP_BIN" "$models" $families
