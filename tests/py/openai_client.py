"""Drives `weft serve` with the official `openai` Python client.

Usage: openai_client.py BASE_URL MODEL_NAME
Every check asserts; the script prints one line per check and exits non-zero on failure.
Generation is kept short (greedy, few tokens) so it runs on 2 CPU cores in debug builds.
"""
import sys

import openai
import requests

from common import check, openai_client

base, model = sys.argv[1], sys.argv[2]
client = openai_client(base, 600)
MSG = [{"role": "user", "content": "Name three colors."}]
N = 8


# Models.
ids = [m.id for m in client.models.list().data]
check("models.list", model in ids, ids)
check("models.retrieve", client.models.retrieve(model).id == model)

# Chat, non-streaming, greedy.
raw = client.chat.completions.with_raw_response.create(model=model, messages=MSG, max_tokens=N, temperature=0)
check("backend header", raw.headers.get("x-weft-backend") == "cpu", dict(raw.headers))
r = raw.parse()
text = r.choices[0].message.content
check("chat text", isinstance(text, str) and len(text) > 0, r)
check("chat role", r.choices[0].message.role == "assistant")
check("chat finish", r.choices[0].finish_reason in ("stop", "length"), r.choices[0].finish_reason)
u = r.usage
check("usage sums", u.total_tokens == u.prompt_tokens + u.completion_tokens and 0 < u.completion_tokens <= N, u)
check("usage cached field", u.prompt_tokens_details is not None and u.prompt_tokens_details.cached_tokens >= 0, u)

# Chat, streaming, with usage: same text as non-streaming.
chunks = list(client.chat.completions.create(model=model, messages=MSG, max_tokens=N, temperature=0,
                                             stream=True, stream_options={"include_usage": True}))
check("stream role chunk", chunks[0].choices[0].delta.role == "assistant", chunks[0])
streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
check("stream text == non-stream text", streamed == text, (streamed, text))
finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
check("stream finish chunk", len(finals) == 1 and finals[0].choices[0].finish_reason == r.choices[0].finish_reason)
check("stream usage chunk", chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == u.completion_tokens,
      chunks[-1])

# Stop sequence: cut the greedy text at a later piece of it.
cut = text.strip()[len(text.strip()) // 2:][:3]
if cut.strip():
    s = client.chat.completions.create(model=model, messages=MSG, max_tokens=N, temperature=0, stop=[cut])
    out = s.choices[0].message.content
    check("stop string", cut not in out and text.startswith(out) and s.choices[0].finish_reason == "stop",
          (cut, out, text))

# Logprobs.
lp = client.chat.completions.create(model=model, messages=MSG, max_tokens=4, temperature=0, logprobs=True,
                                    top_logprobs=3)
content = lp.choices[0].logprobs.content
check("logprobs count", len(content) == lp.usage.completion_tokens, content)
for e in content:
    tops = [t.logprob for t in e.top_logprobs]
    assert len(tops) == 3 and tops == sorted(tops, reverse=True) and e.logprob <= 0
    assert e.top_logprobs[0].token == e.token, "greedy token is the most likely"
    assert abs(e.top_logprobs[0].logprob - e.logprob) < 1e-4
check("logprobs shape", True)

# Seed determinism (sampling at temperature 1).
a = client.chat.completions.create(model=model, messages=MSG, max_tokens=N, temperature=1.0, seed=1234)
b = client.chat.completions.create(model=model, messages=MSG, max_tokens=N, temperature=1.0, seed=1234)
check("seed determinism", a.choices[0].message.content == b.choices[0].message.content,
      (a.choices[0].message.content, b.choices[0].message.content))

# n = 2, greedy: identical choices.
nn = client.chat.completions.create(model=model, messages=MSG, max_tokens=4, temperature=0, n=2)
check("n=2", [c.index for c in nn.choices] == [0, 1] and nn.choices[0].message.content == nn.choices[1].message.content)

# Completions, echo, streaming.
c = client.completions.create(model=model, prompt="The capital of France is", max_tokens=N, temperature=0)
ctext = c.choices[0].text
check("completion", len(ctext) > 0 and c.object == "text_completion", c)
e = client.completions.create(model=model, prompt="The capital of France is", max_tokens=N, temperature=0, echo=True)
check("completion echo", e.choices[0].text == "The capital of France is" + ctext, e.choices[0].text)
sc = "".join(x.choices[0].text for x in client.completions.create(
    model=model, prompt="The capital of France is", max_tokens=N, temperature=0, stream=True) if x.choices)
check("completion stream", sc == ctext, (sc, ctext))
cl = client.completions.create(model=model, prompt="The capital of France is", max_tokens=3, temperature=0, logprobs=2)
check("completion logprobs", len(cl.choices[0].logprobs.tokens) == 3 and
      all(len(t) == 2 for t in cl.choices[0].logprobs.top_logprobs), cl.choices[0].logprobs)

# Prefix reuse: the second turn repeats the first conversation.
turn1 = [{"role": "user", "content": "Write one sentence about the sea, please."}]
t1 = client.chat.completions.create(model=model, messages=turn1, max_tokens=6, temperature=0)
turn2 = turn1 + [{"role": "assistant", "content": t1.choices[0].message.content},
                 {"role": "user", "content": "And one about the sky."}]
t2 = client.chat.completions.create(model=model, messages=turn2, max_tokens=4, temperature=0)
check("cached_tokens >= first prompt", t2.usage.prompt_tokens_details.cached_tokens >= t1.usage.prompt_tokens,
      (t1.usage, t2.usage))

# Errors.
def status_of(fn):
    try:
        fn()
    except openai.APIStatusError as ex:
        return ex.status_code, ex.body
    raise AssertionError("no error")


st, body = status_of(lambda: client.chat.completions.create(model="nope", messages=MSG, max_tokens=2))
check("unknown model 404", st == 404 and body["code"] == "model_not_found", body)
st, body = status_of(lambda: client.chat.completions.create(model=model, messages=MSG, max_tokens=-1))
check("negative max_tokens 400", st == 400, body)
st, body = status_of(lambda: client.chat.completions.create(model=model, messages=[], max_tokens=2))
check("empty messages 400", st == 400, body)
emb = client.embeddings.create(model=model, input="x")
check("embeddings of a chat model", len(emb.data) == 1 and len(emb.data[0].embedding) > 0, emb)

# Tokenize / detokenize round trip.
tk = requests.post(base + "/v1/tokenize", json={"content": "Hello world, weft!", "add_special": False}).json()
dt = requests.post(base + "/v1/detokenize", json={"tokens": tk["tokens"]}).json()
check("tokenize round trip", dt["content"] == "Hello world, weft!" and tk["count"] == len(tk["tokens"]), (tk, dt))
print("ALL OK")
