"""Drives the embedding routes of `weft serve` with the official `openai` and `ollama` clients.

Usage: embeddings_client.py BASE_URL EMBED_MODEL CHAT_MODEL REFERENCE_JSON
EMBED_MODEL serves all-MiniLM-L6-v2 (its vectors are checked against sentence-transformers'
reference); CHAT_MODEL is a decoder chat model (it embeds too, and chat routes keep working).
"""
import json
import math
import sys

import ollama
import openai
import requests

from common import check, openai_client

base, embed_model, chat_model, ref_path = sys.argv[1:5]
ref = json.load(open(ref_path, encoding="utf-8"))
sents = ref["sentences"]
MIN_COS = 0.9999


def cos(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb)


def norm(v):
    return math.sqrt(sum(x * x for x in v))


client = openai_client(base, 600)

# --- openai: one input, float.
r = client.embeddings.create(model=embed_model, input=sents[6]["text"], encoding_format="float")
check("openai float", len(r.data) == 1 and len(r.data[0].embedding) == 384, r)
check("openai float cosine", cos(r.data[0].embedding, sents[6]["embedding"]) >= MIN_COS)
check("openai usage", r.usage.prompt_tokens == len(sents[6]["ids"]) and r.model == embed_model, r.usage)

# --- openai: the client's default (base64, decoded by the client), a batch of 64 (of the
# sentences that fit: OpenAI refuses an input longer than the model takes, checked below).
fits = [s for s in sents if s["n_tokens_untruncated"] <= ref["max_seq_length"]]
batch = [fits[i % len(fits)]["text"] for i in range(64)]
r = client.embeddings.create(model=embed_model, input=batch)
check("openai base64 batch of 64", len(r.data) == 64 and [d.index for d in r.data] == list(range(64)))
worst = min(cos(d.embedding, fits[i % len(fits)]["embedding"]) for i, d in enumerate(r.data))
check("openai batch cosine", worst >= MIN_COS, worst)
raw = requests.post(base + "/v1/embeddings", json={"model": embed_model, "input": "x",
                                                   "encoding_format": "base64"}).json()
check("base64 is a string", isinstance(raw["data"][0]["embedding"], str), raw)

# --- openai: dimensions=128 (cut, renormalised).
r = client.embeddings.create(model=embed_model, input=sents[6]["text"], dimensions=128)
v = r.data[0].embedding
want = sents[6]["pooled"][:128]
check("openai dimensions=128", len(v) == 128 and abs(norm(v) - 1) < 1e-4 and cos(v, want) >= MIN_COS)

# --- openai: token-id input (one array, and an array of arrays), ids without [CLS]/[SEP].
ids = sents[6]["ids"][1:-1]
r = client.embeddings.create(model=embed_model, input=ids, encoding_format="float")
check("openai token ids", cos(r.data[0].embedding, sents[6]["embedding"]) >= MIN_COS)
ids2 = sents[7]["ids"][1:-1]
r = client.embeddings.create(model=embed_model, input=[ids, ids2], encoding_format="float")
check("openai token-id arrays", len(r.data) == 2 and cos(r.data[1].embedding, sents[7]["embedding"]) >= MIN_COS)

# --- openai: bad input, each a 4xx with a message in OpenAI's shape.
def status(body):
    resp = requests.post(base + "/v1/embeddings", json=body)
    return resp.status_code, resp.json()


for name, body in [
    ("empty list", {"model": embed_model, "input": []}),
    ("over 2048 inputs", {"model": embed_model, "input": ["a"] * 2049}),
    ("non-string items", {"model": embed_model, "input": ["a", 3, {"x": 1}]}),
    ("unknown encoding_format", {"model": embed_model, "input": "a", "encoding_format": "int8"}),
    ("dimensions 0", {"model": embed_model, "input": "a", "dimensions": 0}),
    ("dimensions -3", {"model": embed_model, "input": "a", "dimensions": -3}),
    ("dimensions over the model's", {"model": embed_model, "input": "a", "dimensions": 385}),
    ("too long", {"model": embed_model, "input": sents[-1]["text"]}),
    ("token outside the vocabulary", {"model": embed_model, "input": [1, 99999999]}),
    ("missing input", {"model": embed_model}),
]:
    st, b = status(body)
    check("openai 400: " + name, st == 400 and b["error"]["message"], (st, b))
st, b = status({"model": "no-such-model", "input": "a"})
check("openai unknown model 404", st == 404, (st, b))
try:
    client.embeddings.create(model=embed_model, input=[])
    check("openai client raises on bad input", False)
except openai.BadRequestError as e:
    check("openai client raises on bad input", e.status_code == 400)

# --- ollama: embed (normalised vectors, counts), embeddings (legacy, not normalised).
oc = ollama.Client(host=base, timeout=600)
r = oc.embed(model=embed_model, input=[sents[6]["text"], sents[21]["text"]])
check("ollama embed", len(r.embeddings) == 2 and r.prompt_eval_count ==
      len(sents[6]["ids"]) + len(sents[21]["ids"]), r.prompt_eval_count)
check("ollama embed cosine", cos(r.embeddings[1], sents[21]["embedding"]) >= MIN_COS)
check("ollama embed durations", r.total_duration > 0 and r.load_duration >= 0)
r = oc.embed(model=embed_model, input="")
check("ollama embed empty string", cos(r.embeddings[0], sents[0]["embedding"]) >= MIN_COS)
r = oc.embed(model=embed_model, input=sents[-2]["text"], truncate=True)
check("ollama embed truncates", cos(r.embeddings[0], sents[-2]["embedding"]) >= MIN_COS)
try:
    oc.embed(model=embed_model, input=sents[-2]["text"], truncate=False)
    check("ollama truncate=false too long", False)
except ollama.ResponseError as e:
    check("ollama truncate=false too long", e.status_code == 400 and "tokens" in e.error, e.error)
r = oc.embeddings(model=embed_model, prompt=sents[6]["text"])
check("ollama embeddings (legacy)", cos(r.embedding, sents[6]["pooled"]) >= MIN_COS
      and abs(norm(r.embedding) - norm(sents[6]["pooled"])) < 1e-3 * norm(sents[6]["pooled"]))
for name, body in [("empty list", {"model": embed_model, "input": []}),
                   ("non-string items", {"model": embed_model, "input": [1, 2]})]:
    resp = requests.post(base + "/api/embed", json=body)
    check("ollama 400: " + name, resp.status_code == 400 and resp.json()["error"], resp.text)

# --- chat routes against the embedding model: 400, the model does not generate text.
resp = requests.post(base + "/v1/chat/completions", json={
    "model": embed_model, "messages": [{"role": "user", "content": "hi"}]})
check("chat on an embedding model 400", resp.status_code == 400
      and "does not generate text" in resp.json()["error"]["message"], resp.text)
try:
    oc.generate(model=embed_model, prompt="hi")
    check("ollama generate on an embedding model", False)
except ollama.ResponseError as e:
    check("ollama generate on an embedding model", e.status_code == 400 and "does not generate text" in e.error, e.error)

# --- a decoder chat model embeds on /api/embed (last token, normalised) and still chats.
r = oc.embed(model=chat_model, input=["The cat sits on the mat.", "A dog runs in the park."])
check("chat model embeds", len(r.embeddings) == 2 and abs(norm(r.embeddings[0]) - 1) < 1e-4
      and cos(r.embeddings[0], r.embeddings[1]) < 0.9999, r.prompt_eval_count)
one = oc.embed(model=chat_model, input="The cat sits on the mat.")
check("chat model: same vector alone", cos(one.embeddings[0], r.embeddings[0]) > 0.9999)
c = oc.chat(model=chat_model, messages=[{"role": "user", "content": "Hi"}], options={"num_predict": 4})
check("chat model still chats", c.done and len(c.message.content) > 0)

print("ALL OK")
