"""One stream at a time through `weft serve`: how fast tokens arrive at the client, against the
server's own timing of the same generation.

Usage: single_stream.py --base http://127.0.0.1:8080 --model NAME [--requests 3] [--max-tokens 64]
Each request is a greedy streamed OpenAI chat completion with `ignore_eos`, so every request
generates exactly --max-tokens tokens. Prints one JSON object:
  client_decode_tok_s  (chunks after the first) / (time from the first chunk to the last), the
                       rate a client sees, medians over the requests;
  ttft_s               time to the first content chunk;
  server_eval_tok_s    Ollama `/api/chat` (not streamed) eval_count / eval_duration for the
                       same prompt: the scheduler's first-token-to-end time, without HTTP.
Standard library only.
"""
import argparse
import http.client
import json
import statistics
import time
import urllib.parse

PROMPT = "Write a long story about cats."


def stream_once(u, model, max_tokens):
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({"model": model, "stream": True, "temperature": 0, "max_tokens": max_tokens,
                       "ignore_eos": True, "messages": [{"role": "user", "content": PROMPT}]})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200, (r.status, r.read())
    stamps = []
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        c = json.loads(data)
        if c.get("choices") and c["choices"][0].get("delta", {}).get("content"):
            stamps.append(time.perf_counter())
    conn.close()
    return stamps[0] - t0, (len(stamps) - 1) / (stamps[-1] - stamps[0])


def server_eval(u, model, max_tokens):
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({"model": model, "stream": False, "messages": [{"role": "user", "content": PROMPT}],
                       "options": {"temperature": 0, "num_predict": max_tokens}})
    conn.request("POST", "/api/chat", body, {"Content-Type": "application/json"})
    r = json.loads(conn.getresponse().read())
    conn.close()
    return r["eval_count"] / (r["eval_duration"] / 1e9)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=64)
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.base)
    stream_once(u, a.model, 8)  # warm-up
    runs = [stream_once(u, a.model, a.max_tokens) for _ in range(a.requests)]
    evals = [server_eval(u, a.model, a.max_tokens) for _ in range(a.requests)]
    print(json.dumps({"requests": a.requests, "max_tokens": a.max_tokens,
                      "ttft_s": round(statistics.median(r[0] for r in runs), 3),
                      "client_decode_tok_s": round(statistics.median(r[1] for r in runs), 2),
                      "client_decode_all": [round(r[1], 2) for r in runs],
                      "server_eval_tok_s": round(statistics.median(evals), 2)}))


if __name__ == "__main__":
    main()
