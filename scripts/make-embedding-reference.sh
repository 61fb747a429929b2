#!/usr/bin/env bash
# Makes tests/reference/all-MiniLM-L6-v2.embeddings.json: sentence-transformers (PyTorch, CPU)
# vectors for the sentences in scripts/py/embedding_reference.py, on the all-MiniLM-L6-v2 folder
# that scripts/fetch-models.sh minilm installs. Run by hand when the sentences change; the output
# is committed test data. sentence-transformers and torch (from PyPI, ~3 GB) go in their own
# venv, ~/.cache/weft/st-venv (or $WEFT_ST_VENV), made once.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
models="${WEFT_MODELS_DIR:-$root/models}"
venv="${WEFT_ST_VENV:-$HOME/.cache/weft/st-venv}"
"$root/scripts/fetch-models.sh" minilm
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import sentence_transformers, torch' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q sentence-transformers==6.2.0 torch==2.15.0
fi
OMP_NUM_THREADS=2 "$venv/bin/python" "$root/scripts/py/embedding_reference.py" \
  "$models/all-MiniLM-L6-v2" "$root/tests/reference/all-MiniLM-L6-v2.embeddings.json"
