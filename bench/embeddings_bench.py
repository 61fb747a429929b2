"""Embeddings per second, side by side in one run: sentence-transformers (PyTorch, CPU),
llama.cpp's embedding path (llama-cpp-python, `embedding=True`, on the GGUF) and Weft
(`weft embed --bench`), on all-MiniLM-L6-v2, batches of 1, 32 and 256 sentences of ~128
tokens, 2 threads each. Engines alternate per batch size so machine noise hits all alike.

Usage (see bench/embeddings.sh): embeddings_bench.py WEFT_BIN FOLDER GGUF [REPS]
Prints a Markdown table and one JSON line.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

THREADS = 2
weft_bin, folder, gguf = sys.argv[1:4]
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
os.environ["OMP_NUM_THREADS"] = str(THREADS)

import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

torch.set_num_threads(THREADS)
st = SentenceTransformer(folder, device="cpu")
tok = st.tokenizer

WORDS = ("the history of computing is a story of layers each generation of machines hides "
         "details of the one beneath it so that programmers can think in larger units search "
         "engines recommendation systems and clustering tools all rely on vectors").split()


def sentence(i):
    """A distinct text of ~128 tokens (126 words of the vocabulary, rotated by i)."""
    words = [WORDS[(i * 7 + j) % len(WORDS)] for j in range(126)]
    return " ".join(words)


texts = [sentence(i) for i in range(256)]
n_tok = [len(tok(t)["input_ids"]) for t in texts]
print(f"sentences: {len(texts)}, tokens each {min(n_tok)}..{max(n_tok)}", file=sys.stderr)


def timed(f, batch):
    f(batch)  # warm-up
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        f(batch)
        runs.append(len(batch) / (time.perf_counter() - t))
    return statistics.median(runs)


def st_run(batch):
    st.encode(batch, batch_size=len(batch), convert_to_numpy=True)


from llama_cpp import Llama  # noqa: E402

llm = Llama(model_path=gguf, embedding=True, n_threads=THREADS, n_threads_batch=THREADS,
            n_ctx=8192, n_batch=8192, n_ubatch=8192, verbose=False)


def llama_run(batch):
    llm.embed(batch, normalize=True)


def weft_run_factory(batch):
    """`weft embed --bench` on the batch (one process: load once, warm up, then reps)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(batch) + "\n")
        path = f.name
    out = subprocess.run([weft_bin, "embed", "--model", folder, "--threads", str(THREADS),
                          "--input-file", path, "--bench", str(reps)],
                         capture_output=True, text=True, check=True)
    os.unlink(path)
    return json.loads(out.stdout.strip().splitlines()[-1])["embeddings_per_s"]["median"]


rows = []
for n in (1, 32, 256):
    batch = texts[:n]
    r = {"batch": n}
    r["sentence_transformers"] = timed(st_run, batch)
    r["llama_cpp"] = timed(llama_run, batch)
    r["weft"] = weft_run_factory(batch)
    rows.append(r)
    print(json.dumps(r), file=sys.stderr)

print("| batch | sentence-transformers (PyTorch CPU) | llama.cpp (llama-cpp-python) | Weft | Weft / best other |")
print("|---:|---:|---:|---:|---:|")
for r in rows:
    best = max(r["sentence_transformers"], r["llama_cpp"])
    print(f"| {r['batch']} | {r['sentence_transformers']:.1f} | {r['llama_cpp']:.1f} | {r['weft']:.1f} | {r['weft'] / best:.2f} |")
print(json.dumps({"threads": THREADS, "reps": reps, "tokens_per_sentence": [min(n_tok), max(n_tok)],
                  "torch": torch.__version__, "rows": rows}))
