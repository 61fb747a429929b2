"""Image input on `weft serve` through the official `openai` and `ollama` Python clients, and a
table of bad image inputs (each a 400 with a message; the server keeps serving).

Usage: vision_client.py BASE_URL VISION_MODEL TEXT_MODEL IMAGES_DIR

The server runs VISION_MODEL with a projector, TEXT_MODEL without, --ctx 1024 (more than Gemma
3 270M's 512-position sliding window, so a cached prompt can be rewound to its last token),
--max-images 4, --max-image-bytes 1MiB and --parallel 1 (one slot, so a repeated prompt finds
its cache).
"""
import base64
import struct
import sys
import zlib

import ollama
import requests

from common import check, openai_client

base, model, text_model, images = sys.argv[1:5]
client = openai_client(base, 600)
oll = ollama.Client(host=base, timeout=600)


def read(name):
    with open(f"{images}/{name}", "rb") as f:
        return f.read()


def data_uri(raw, kind="png"):
    return f"data:image/{kind};base64," + base64.b64encode(raw).decode()


SQUARE = read("square_224x224.png")
TALL = read("tall_300x900.png")
LANDSCAPE = read("landscape_640x480.jpg")


def image_messages(uri, text="Describe this image.", detail=None):
    url = {"url": uri}
    if detail:
        url["detail"] = detail
    return [{"role": "user", "content": [
        {"type": "image_url", "image_url": url},
        {"type": "text", "text": text},
    ]}]


# Gemma 3: 256 image rows and the two markers around them.
IMAGE_TOKENS = 258

# --- capabilities and the projector in the model lists
show = requests.post(base + "/api/show", json={"model": model}).json()
check("show vision", "vision" in show["capabilities"], show["capabilities"])
show_text = requests.post(base + "/api/show", json={"model": text_model}).json()
check("show text-only", "vision" not in show_text["capabilities"], show_text["capabilities"])
ui = requests.get(base + "/api/models").json()
check("ui projector", ui["projector"] == "mmproj-gemma3-tiny-f16.gguf", ui)

# --- openai: image_url data URI, usage counts the image, the same image again reuses the cache
r1 = client.chat.completions.create(
    model=model, messages=image_messages(data_uri(SQUARE), detail="low"),
    max_tokens=6, temperature=0)
u1 = r1.usage
check("openai image", r1.choices[0].message.content is not None and u1.completion_tokens > 0, r1)
check("openai usage counts the image", u1.prompt_tokens > IMAGE_TOKENS, u1)
r2 = client.chat.completions.create(
    model=model, messages=image_messages(data_uri(SQUARE), detail="low"),
    max_tokens=6, temperature=0)
u2 = r2.usage
cached2 = u2.prompt_tokens_details.cached_tokens
check("same image reuses the cache", u2.prompt_tokens == u1.prompt_tokens
      and cached2 >= IMAGE_TOKENS, u2)
check("same image same answer", r2.choices[0].message.content == r1.choices[0].message.content,
      (r1.choices[0].message.content, r2.choices[0].message.content))
# Another image with the same text: only the tokens before the image come from the cache.
r3 = client.chat.completions.create(
    model=model, messages=image_messages(data_uri(TALL)), max_tokens=6, temperature=0)
u3 = r3.usage
check("another image is evaluated again", u3.prompt_tokens == u1.prompt_tokens
      and u3.prompt_tokens_details.cached_tokens < 16, u3)
# Streaming, a JPEG.
parts = list(client.chat.completions.create(
    model=model, messages=image_messages(data_uri(LANDSCAPE, "jpeg")), max_tokens=4,
    temperature=0, stream=True, stream_options={"include_usage": True}))
check("openai stream", parts[-1].usage is not None and parts[-1].usage.prompt_tokens > IMAGE_TOKENS,
      parts[-1])
# Text-only requests to the vision model still work.
t = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4, temperature=0)
check("text on the vision model", t.usage.prompt_tokens < IMAGE_TOKENS, t.usage)

# --- ollama: images on chat and generate
c = oll.chat(model=model, messages=[{"role": "user", "content": "Describe this image.",
                                     "images": [SQUARE]}],
             options={"num_predict": 6, "temperature": 0}, stream=False)
check("ollama chat image", c.done and c.prompt_eval_count > IMAGE_TOKENS, c)
g = oll.generate(model=model, prompt="Describe this image.", images=[TALL],
                 options={"num_predict": 6, "temperature": 0}, stream=False)
check("ollama generate image", g.done and g.prompt_eval_count > IMAGE_TOKENS, g)
gs = list(oll.generate(model=model, prompt="Describe this image.", images=[TALL],
                       options={"num_predict": 6, "temperature": 0}, stream=True))
check("ollama generate stream", "".join(p.response for p in gs) == g.response, (gs, g))


# --- bad inputs: each a 400 with a message
def png_header(width, height):
    """A PNG whose header claims width x height (a decompression bomb's header), with one tiny
    compressed row of data after it."""
    def chunk(kind, body):
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def post_chat(messages, m=model):
    return requests.post(base + "/v1/chat/completions",
                         json={"model": m, "messages": messages, "max_tokens": 2})


def bad(name, resp, needle, code=None):
    body = resp.json()
    err = body.get("error", body)
    msg = err["message"] if isinstance(err, dict) else err
    check(name, resp.status_code == 400 and needle in msg
          and (code is None or err.get("code") == code), (resp.status_code, body))


bad("text-only model", post_chat(image_messages(data_uri(SQUARE)), text_model),
    "does not accept images", "vision_not_supported")
bad("remote url", post_chat(image_messages("https://example.invalid/cat.png")), "data URI")
bad("corrupt image", post_chat(image_messages(data_uri(b"\x89PNG\r\n\x1a\nnot really a png"))),
    "image 0")
bad("not an image", post_chat(image_messages(data_uri(b"hello, world"))), "unrecognized image")
bad("decompression bomb", post_chat(image_messages(data_uri(png_header(30000, 30000)))),
    "30000x30000")
many = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_uri(SQUARE)}}
                                     for _ in range(5)]}]
bad("too many images", post_chat(many), "too many images")
four = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_uri(SQUARE)}}
                                     for _ in range(4)]}]
bad("image tokens over the context", post_chat(four), "context holds", "context_length_exceeded")
bad("too many bytes", post_chat(image_messages(data_uri(b"\x00" * (1100 * 1024)))), "bytes")
audio = [{"role": "user", "content": [
    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}]
bad("audio", post_chat(audio), "audio input is not supported")
bad("bad base64", post_chat(image_messages("data:image/png;base64,@@@@")), "base64")
r = requests.post(base + "/api/chat", json={"model": model, "stream": False, "messages": [
    {"role": "user", "content": "x", "images": ["@@@@"]}]})
check("ollama bad image", r.status_code == 400 and "base64" in r.json()["error"], r.text)
r = requests.post(base + "/api/generate", json={"model": text_model, "stream": False,
                                                "prompt": "x",
                                                "images": [base64.b64encode(SQUARE).decode()]})
check("ollama text-only model", r.status_code == 400 and "does not accept images" in r.json()["error"],
      r.text)
check("still serving", requests.get(base + "/health").status_code == 200)
# And still answering images.
ok = client.chat.completions.create(
    model=model, messages=image_messages(data_uri(SQUARE)), max_tokens=2, temperature=0)
check("image after errors", ok.usage.prompt_tokens > IMAGE_TOKENS, ok.usage)
print("ALL OK")
