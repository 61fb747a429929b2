"""Qwen2.5-VL (M-RoPE) and Idefics3 through `weft serve` with the official `openai` client:
chat completions give the same greedy answers as `weft run --image` (the engine's one-sequence
path), also when image requests share decode steps with others; `/v1/responses` takes
`input_image` parts, keeps them in the stored input and in a chained conversation; bad
`input_image` parts are 400s.

Usage: vision_families.py BASE_URL QWEN_MODEL IDEFICS_MODEL IMAGES_DIR EXPECTED_JSON

EXPECTED_JSON: {"<model>": {"<image file>": {"text": ..., "prompt_tokens": N}}}, from
`weft run --image FILE --prompt "<__media__>\\nDescribe this image." --temperature 0
--max-tokens 8` (the server renders an image part followed by a text part the same way).
"""
import base64
import json
import sys
import threading

import openai

from common import check, openai_client

base, qwen, idefics, images, expected_path = sys.argv[1:6]
client = openai_client(base, 600)
with open(expected_path) as f:
    expected = json.load(f)
QUESTION = "Describe this image."
MAX_TOKENS = 8


def data_uri(name):
    with open(f"{images}/{name}", "rb") as f:
        raw = f.read()
    kind = "jpeg" if name.endswith(".jpg") else "png"
    return f"data:image/{kind};base64," + base64.b64encode(raw).decode()


def chat(model, name):
    r = client.chat.completions.create(
        model=model, temperature=0, max_tokens=MAX_TOKENS,
        messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": data_uri(name)}},
            {"type": "text", "text": QUESTION},
        ]}])
    return r.choices[0].message.content, r.usage.prompt_tokens


def chat_text(model):
    r = client.chat.completions.create(
        model=model, temperature=0, max_tokens=MAX_TOKENS,
        messages=[{"role": "user", "content": "Say something about pictures."}])
    return r.choices[0].message.content, r.usage.prompt_tokens


# --- each family alone: the server's answer is weft run's
solo = {}
for model, per_image in expected.items():
    for name, want in per_image.items():
        got = chat(model, name)
        check(f"{model} {name} same answer as weft run", got[0] == want["text"],
              (got, want))
        check(f"{model} {name} image tokens in usage", got[1] == want["prompt_tokens"],
              (got, want))
        solo[(model, name)] = got
text_solo = chat_text(qwen)

# --- Qwen2.5-VL's M-RoPE in shared decode steps: two images and a text request at once
jobs = [("img", qwen, n) for (m, n) in solo if m == qwen] + [("text", qwen, None)]
results = {}


def run(job):
    kind, model, name = job
    results[job] = chat(model, name) if kind == "img" else chat_text(model)


threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
for t in threads:
    t.start()
for t in threads:
    t.join()
for job in jobs:
    want = solo[(job[1], job[2])] if job[0] == "img" else text_solo
    check(f"concurrent {job[0]} {job[2]} same as alone", results[job] == want, (results[job], want))

# --- /v1/responses with input_image
name = next(n for (m, n) in solo if m == qwen)
parts = [{"type": "input_image", "image_url": data_uri(name), "detail": "low"},
         {"type": "input_text", "text": QUESTION}]
r = client.responses.create(model=qwen, temperature=0, max_output_tokens=MAX_TOKENS,
                            input=[{"role": "user", "content": parts}])
check("responses input_image answer", r.output_text == solo[(qwen, name)][0],
      (r.output_text, solo[(qwen, name)]))
check("responses usage counts the image", r.usage.input_tokens == solo[(qwen, name)][1],
      r.usage)
items = client.responses.input_items.list(r.id)
kinds = [p.type for it in items.data for p in it.content]
check("stored input keeps the image part", "input_image" in kinds, kinds)
r2 = client.responses.create(model=qwen, temperature=0, max_output_tokens=4,
                             previous_response_id=r.id, input="And the colours?")
check("chained response sees the image again", r2.usage.input_tokens > r.usage.input_tokens,
      (r2.usage, r.usage))

# --- bad input_image parts
bad = [
    ("file_id", {"type": "input_image", "file_id": "file-123"}, "file_id"),
    ("remote url", {"type": "input_image", "image_url": "https://example.invalid/a.png"},
     "data URI"),
    ("no image_url", {"type": "input_image"}, "image_url"),
    ("bad detail", {"type": "input_image", "image_url": data_uri(name), "detail": "huge"},
     "detail"),
    ("corrupt", {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}, "image"),
    ("image in an assistant message", None, "input_image"),
]
for label, part, word in bad:
    if part is None:
        msgs = [{"role": "assistant", "content": [
            {"type": "input_image", "image_url": data_uri(name)}]},
            {"role": "user", "content": QUESTION}]
    else:
        msgs = [{"role": "user", "content": [part, {"type": "input_text", "text": QUESTION}]}]
    try:
        client.responses.create(model=qwen, max_output_tokens=2, input=msgs)
        check(f"bad {label} refused", False, "accepted")
    except openai.BadRequestError as e:
        check(f"bad {label} refused with 400", word in str(e), str(e))

# The server still answers.
check("still serving", chat(qwen, name) == solo[(qwen, name)])
print("ALL OK")
