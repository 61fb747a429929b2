"""llama.cpp's speed on a GGUF, measured the way `llama-bench -p P -n N` does, through
llama-cpp-python: prompt processing of P tokens in one batch, then N single-token decode steps,
repeated R times on a fresh context. Prints one JSON object like `weft bench --json`."""
import argparse, json, resource, statistics, time

import llama_cpp

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("-p", type=int, default=512)
ap.add_argument("-n", type=int, default=128)
ap.add_argument("-r", type=int, default=5)
a = ap.parse_args()

llm = llama_cpp.Llama(model_path=a.model, n_ctx=a.p + a.n + 16, n_batch=max(a.p, 1), n_ubatch=max(a.p, 1),
                      n_threads=a.threads, n_threads_batch=a.threads, verbose=False, flash_attn=False)
vocab = llm.n_vocab()
# llama-bench feeds random token ids; a fixed arithmetic pattern keeps runs comparable.
prompt = [(i * 7919 + 13) % vocab for i in range(a.p)]

def run_once():
    llm.reset()
    llm._ctx.kv_cache_clear()
    t0 = time.perf_counter()
    llm.eval(prompt)
    t1 = time.perf_counter()
    tok = prompt[-1]
    for _ in range(a.n):
        llm.eval([tok])
        tok = (tok * 31 + 7) % vocab
    t2 = time.perf_counter()
    return a.p / (t1 - t0), a.n / (t2 - t1)

run_once()  # warm-up, as llama-bench does
pp, tg = zip(*(run_once() for _ in range(a.r)))
summ = lambda xs: {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
print(json.dumps({
    "engine": "llama.cpp", "version": llama_cpp.__version__, "model": a.model, "threads": a.threads,
    "n_prompt": a.p, "n_gen": a.n, "reps": a.r,
    "prompt_tokens_per_s": summ(pp), "gen_tokens_per_s": summ(tg),
    "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
}))
