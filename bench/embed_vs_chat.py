"""Does a large embedding request stall running chat streams? Streams a chat reply from
CHAT_MODEL twice on `weft serve` at BASE: alone, then while a 256-input embedding request
(~128 tokens each) runs on EMBED_MODEL; prints the gaps between streamed tokens (median,
max) and tokens/s of both runs, and how long the embedding request took, as one JSON line.

Usage: embed_vs_chat.py BASE CHAT_MODEL EMBED_MODEL
"""
import json
import statistics
import sys
import threading
import time

import requests

base, chat_model, embed_model = sys.argv[1:4]
WORDS = "the history of computing is a story of layers each generation hides the one beneath".split()
texts = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(120)) for i in range(256)]


def stream(n=48):
    body = {"model": chat_model, "messages": [{"role": "user", "content": "Tell me a story."}],
            "max_tokens": n, "stream": True, "temperature": 0, "ignore_eos": True}
    times = []
    with requests.post(base + "/v1/chat/completions", json=body, stream=True, timeout=600) as r:
        for line in r.iter_lines():
            if line.startswith(b"data: {"):
                times.append(time.perf_counter())
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {"tokens": len(times), "median_gap_ms": 1000 * statistics.median(gaps),
            "max_gap_ms": 1000 * max(gaps), "tok_s": (len(times) - 1) / (times[-1] - times[0])}


requests.post(base + "/api/embed", json={"model": embed_model, "input": "warm up"}).raise_for_status()
alone = stream()
done = {}


def embed():
    t = time.perf_counter()
    r = requests.post(base + "/api/embed", json={"model": embed_model, "input": texts}, timeout=600)
    r.raise_for_status()
    done["embed_s"] = time.perf_counter() - t


th = threading.Thread(target=embed)
th.start()
time.sleep(0.2)
during = stream()
th.join()
print(json.dumps({"alone": alone, "during_embedding": during, **done}))
