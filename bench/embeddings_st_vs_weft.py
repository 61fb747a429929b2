"""Embeddings per second, sentence-transformers (PyTorch CPU) and Weft side by side, without
llama.cpp (for a machine where bench/build-llamacpp.sh has not run; bench/embeddings.sh is the
full three-way comparison). Same sentences as bench/embeddings_bench.py, 2 threads each.

Usage: ST_VENV/bin/python bench/embeddings_st_vs_weft.py WEFT_BIN FOLDER [REPS]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["OMP_NUM_THREADS"] = "2"
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

weft_bin, folder = sys.argv[1:3]
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
torch.set_num_threads(2)
st = SentenceTransformer(folder, device="cpu")
WORDS = ("the history of computing is a story of layers each generation of machines hides "
         "details of the one beneath it so that programmers can think in larger units search "
         "engines recommendation systems and clustering tools all rely on vectors").split()
texts = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(126)) for i in range(256)]

print("| batch | sentence-transformers | Weft |\n|---|---|---|")
for n in (1, 32, 256):
    batch = texts[:n]
    st.encode(batch, batch_size=n)
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        st.encode(batch, batch_size=n)
        runs.append(n / (time.perf_counter() - t))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(batch) + "\n")
    out = subprocess.run([weft_bin, "embed", "--model", folder, "--threads", "2",
                          "--input-file", f.name, "--bench", str(reps)],
                         capture_output=True, text=True, check=True)
    os.unlink(f.name)
    weft = json.loads(out.stdout.strip().splitlines()[-1])["embeddings_per_s"]["median"]
    print(f"| {n} | {statistics.median(runs):.1f} | {weft:.1f} |", flush=True)
