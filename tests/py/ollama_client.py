"""Drives `weft serve` with the official `ollama` Python client.

Usage: ollama_client.py BASE_URL MODEL_NAME
"""
import sys

import ollama
import requests

from common import check

base, model = sys.argv[1], sys.argv[2]
client = ollama.Client(host=base, timeout=600)
MSG = [{"role": "user", "content": "Name three colors."}]
OPTS = {"num_predict": 8, "temperature": 0}


names = [m.model for m in client.list().models]
check("list", model + ":latest" in names, names)
sh = client.show(model)
check("show", sh.details.format == "gguf" and sh.modelinfo is not None, sh)
check("ps", len(client.ps().models) == 1)
check("version", "version" in requests.get(base + "/api/version").json())

r = client.chat(model=model, messages=MSG, options=OPTS, stream=False)
text = r.message.content
check("chat", r.done and r.message.role == "assistant" and len(text) > 0, r)
check("chat counts", r.eval_count <= 8 and r.prompt_eval_count > 0 and r.total_duration > 0
      and r.eval_duration >= 0 and r.done_reason in ("stop", "length"), r)
parts = list(client.chat(model=model, messages=MSG, options=OPTS, stream=True))
check("chat stream", "".join(p.message.content for p in parts) == text and parts[-1].done
      and not any(p.done for p in parts[:-1]), parts)

g = client.generate(model=model, prompt="The capital of France is", options=OPTS, raw=True)
check("generate", g.done and len(g.response) > 0, g)
gs = list(client.generate(model=model, prompt="The capital of France is", options=OPTS, raw=True, stream=True))
check("generate stream", "".join(p.response for p in gs) == g.response and gs[-1].done)
gt = client.generate(model=model, prompt="Name three colors.", options=OPTS)
check("generate templated == chat", gt.response == text, (gt.response, text))

cut = text.strip()[len(text.strip()) // 2:][:3]
if cut.strip():
    s = client.chat(model=model, messages=MSG, options={**OPTS, "stop": [cut]})
    check("stop", cut not in s.message.content and text.startswith(s.message.content), (cut, s.message.content))

a = client.chat(model=model, messages=MSG, options={"num_predict": 8, "temperature": 1.0, "seed": 7})
b = client.chat(model=model, messages=MSG, options={"num_predict": 8, "temperature": 1.0, "seed": 7})
check("seed determinism", a.message.content == b.message.content)

# Prefix reuse (raw JSON for the cache fields).
turn1 = [{"role": "user", "content": "Write one sentence about the sea, please."}]
t1 = requests.post(base + "/api/chat", json={"model": model, "messages": turn1, "stream": False,
                                             "options": {"num_predict": 6, "temperature": 0}}).json()
turn2 = turn1 + [t1["message"], {"role": "user", "content": "And one about the sky."}]
t2 = requests.post(base + "/api/chat", json={"model": model, "messages": turn2, "stream": False,
                                             "options": {"num_predict": 4, "temperature": 0}}).json()
check("prompt_cache_hit_tokens", t2["prompt_cache_hit_tokens"] >= t1["prompt_eval_count"], (t1, t2))

try:
    client.chat(model="nope", messages=MSG, options=OPTS)
    raise AssertionError("no error")
except ollama.ResponseError as e:
    check("unknown model 404", e.status_code == 404 and "nope" in e.error, e)
print("ALL OK")
