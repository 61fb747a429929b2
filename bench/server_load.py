"""Load generator for OpenAI-compatible servers: streams greedy chat completions from C
concurrent threads and reports aggregate generation tokens/s, time to first token and
inter-token latency (p50 / p95 over all requests' gaps between content chunks).

Usage: server_load.py --base http://127.0.0.1:8080 --model NAME [--concurrency 1,4,16]
                      [--requests-per-thread 2] [--max-tokens 64]
Prints one JSON object per concurrency level. Uses only the standard library, so it runs in
any venv. Tokens are counted as streamed content chunks (both weft and llama.cpp's server send
one chunk per generated token); the figures are per level: wall time from the first request
sent to the last response finished.
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse

SUBJECTS = ["cats", "rivers", "winter", "bread", "music", "trains", "the moon", "gardens", "rain",
            "books", "bicycles", "coffee", "mountains", "the ocean", "clocks", "honey"]


def one(base, model, subject, max_tokens):
    """One streamed request: (ttft seconds, chunks with content, seconds, inter-chunk gaps)."""
    u = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({"model": model, "stream": True, "temperature": 0, "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": f"Write a long story about {subject}."}]})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200, (r.status, r.read())
    ttft, chunks, gaps, last = None, 0, [], None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        c = json.loads(data)
        if c.get("choices") and c["choices"][0].get("delta", {}).get("content"):
            chunks += 1
            now = time.perf_counter()
            if ttft is None:
                ttft = now - t0
            else:
                gaps.append(now - last)
            last = now
    conn.close()
    return ttft or 0.0, chunks, time.perf_counter() - t0, gaps


def pct(xs, q):
    """The q-quantile of xs (nearest rank)."""
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def level(base, model, c, per_thread, max_tokens):
    results = []
    lock = threading.Lock()

    def worker(k):
        for j in range(per_thread):
            subject = SUBJECTS[(k * per_thread + j) % len(SUBJECTS)]
            r = one(base, model, subject, max_tokens)
            with lock:
                results.append(r)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(c)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    tokens = sum(r[1] for r in results)
    ttfts = [r[0] for r in results]
    gaps = [g for r in results for g in r[3]]
    return {"concurrency": c, "requests": len(results), "tokens": tokens, "wall_s": round(wall, 2),
            "gen_tok_s": round(tokens / wall, 2), "ttft_median_s": round(statistics.median(ttfts), 3),
            "ttft_p95_s": round(pct(ttfts, 0.95), 3), "ttft_max_s": round(max(ttfts), 3),
            "itl_p50_s": round(pct(gaps, 0.5), 4), "itl_p95_s": round(pct(gaps, 0.95), 4)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--requests-per-thread", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    a = ap.parse_args()
    # Warm-up (page in the weights, compile nothing twice).
    one(a.base, a.model, "warm-up", 4)
    for c in [int(x) for x in a.concurrency.split(",")]:
        per = max(1, a.requests_per_thread if c > 1 else a.requests_per_thread * 2)
        print(json.dumps(level(a.base, a.model, c, per, a.max_tokens)), flush=True)


if __name__ == "__main__":
    main()
