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
os.environ["OMP_NUM_THREADS"] = str(THREADS)


def timed(f, batch, reps):
    f(batch)  # warm-up
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        f(batch)
        runs.append(len(batch) / (time.perf_counter() - t))
    return statistics.median(runs)


if sys.argv[1] == "--llama":
    # llama.cpp in a process of its own: its OpenMP threads and PyTorch's, in one process,
    # spin-wait against each other on 2 cores (measured: both fell to ~1 embedding/s).
    from llama_cpp import Llama

    gguf, reps, path = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    batch = open(path).read().splitlines()
    # Batches of llama.cpp's default micro-batch (512 tokens: 3 of these sentences per
    # decode). One 8192-token batch is far slower: with embedding=True llama-cpp-python packs
    # up to 256 sequences into one unified cache, and the encoder's attention then spans every
    # token of the batch under a mask (measured: 0.8 embeddings/s at batch 32).
    llm = Llama(model_path=gguf, embedding=True, n_threads=THREADS, n_threads_batch=THREADS,
                n_ctx=8192, n_batch=512, n_ubatch=512, verbose=False)
    print(timed(lambda b: llm.embed(b, normalize=True), batch, reps))
    sys.exit(0)

weft_bin, folder, gguf = sys.argv[1:4]
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 3

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


def st_run(batch):
    st.encode(batch, batch_size=len(batch), convert_to_numpy=True)


def batch_file(batch):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(batch) + "\n")
        return f.name


def llama_run(batch):
    """llama-cpp-python's `embed` (embedding=True: up to 256 sequences per decode, unified KV)
    in a child process on the batch."""
    path = batch_file(batch)
    out = subprocess.run([sys.executable, __file__, "--llama", gguf, str(reps), path],
                         capture_output=True, text=True, check=True)
    os.unlink(path)
    return float(out.stdout.strip().splitlines()[-1])


def weft_run_factory(batch):
    """`weft embed --bench` on the batch (one process: load once, warm up, then reps)."""
    path = batch_file(batch)
    out = subprocess.run([weft_bin, "embed", "--model", folder, "--threads", str(THREADS),
                          "--input-file", path, "--bench", str(reps)],
                         capture_output=True, text=True, check=True)
    os.unlink(path)
    return json.loads(out.stdout.strip().splitlines()[-1])["embeddings_per_s"]["median"]


rows = []
for n in (1, 32, 256):
    batch = texts[:n]
    r = {"batch": n}
    r["sentence_transformers"] = timed(st_run, batch, reps)
    r["llama_cpp"] = llama_run(batch)
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
