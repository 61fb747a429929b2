"""Uploaded images and videos on `weft serve` (the chat-UI protocol's `/api/upload` and
`imagePaths` / `isVideo`), and OpenAI `video_url` parts through the official `openai` client,
with a table of bad inputs (each a 4xx with a message; the server keeps serving).

Usage: vision_media_client.py BASE_URL VISION_MODEL TEXT_MODEL IMAGES_DIR MEDIA_DIR

The server runs VISION_MODEL (Gemma 3 270M + the tiny projector: 258 positions an image) and
TEXT_MODEL without a projector, with --ctx 2048.
"""
import base64
import sys

import requests

from common import check, openai_client

base, model, text_model, images, media = sys.argv[1:6]
client = openai_client(base, 600)
IMAGE_TOKENS = 258


def read(path):
    with open(path, "rb") as f:
        return f.read()


SQUARE = read(f"{images}/square_224x224.png")
# 4 s at 8 fps, 64x48 (tests/data/media/README.md).
VIDEO = read(f"{media}/h264_baseline.mp4")


def session():
    r = requests.post(base + "/api/sessions")
    check("new session", r.status_code == 200, r.text)
    return r.json()["sessionId"]


def upload(sid, name, raw):
    return requests.post(base + "/api/upload", data={"sessionId": sid},
                         files={"file": (name, raw)})


def ui_chat(sid, message, m=model, **top):
    body = {"model": m, "sessionId": sid, "maxTokens": 3, "temperature": 0,
            "messages": [message], **top}
    return requests.post(base + "/api/ui/chat", json=body)


def done_frame(r):
    """The terminal `done` frame of a chat-UI SSE reply, and the answer text."""
    check("ui chat status", r.status_code == 200, (r.status_code, r.text[:300]))
    answer, done = "", None
    for line in r.text.splitlines():
        if not line.startswith("data:"):
            continue
        f = __import__("json").loads(line[5:])
        answer += f.get("token", "")
        if f.get("done"):
            done = f
    check("ui chat done", done is not None and done.get("error") is None, r.text[-300:])
    return done, answer


def error_of(r):
    body = r.json()
    err = body.get("error", body)
    return err["message"] if isinstance(err, dict) else err, (
        err.get("code") if isinstance(err, dict) else None)


def bad(name, r, needle, status=400, code=None):
    msg, got_code = error_of(r)
    check(name, r.status_code == status and needle in msg
          and (code is None or got_code == code), (r.status_code, r.text[:400]))


# --- chat UI: an uploaded image in imagePaths
a = session()
up = upload(a, "square.png", SQUARE)
check("upload png", up.status_code == 200 and up.json()["kind"] == "image", up.text)
pic = up.json()["file"]
done, answer = done_frame(ui_chat(a, {"role": "user", "content": "What is this?",
                                      "imagePaths": [pic]}))
check("imagePaths reach the model", done["promptTokens"] > IMAGE_TOKENS and done["tokenCount"] > 0,
      done)
# A top-level imagePaths belongs to the last user message.
done, _ = done_frame(ui_chat(a, {"role": "user", "content": "And now?"}, imagePaths=[pic],
                             newChat=True))
check("top-level imagePaths", done["promptTokens"] > IMAGE_TOKENS, done)
# Another session's upload is not found; a text upload is not an image; audio is refused.
b = session()
bad("another session's image", ui_chat(b, {"role": "user", "content": "x", "imagePaths": [pic]}),
    "no upload")
txt = upload(a, "notes.txt", b"hello").json()["file"]
bad("text upload as an image", ui_chat(a, {"role": "user", "content": "x", "imagePaths": [txt]}),
    "not an image")
bad("audioPaths", ui_chat(a, {"role": "user", "content": "x", "audioPaths": ["x.wav"]}),
    "audio input is not supported")
bad("isVideo without frames", ui_chat(a, {"role": "user", "content": "x", "isVideo": True}),
    "isVideo needs")
t = session()
pic_t = upload(t, "square.png", SQUARE).json()["file"]
bad("image on the text-only model",
    ui_chat(t, {"role": "user", "content": "x", "imagePaths": [pic_t]}, m=text_model),
    "does not accept images")

# --- openai: video_url parts (data URIs), frames labelled with their times
def video_uri(raw, kind="mp4"):
    return f"data:video/{kind};base64," + base64.b64encode(raw).decode()


def video_messages(uri, **opts):
    return [{"role": "user", "content": [
        {"type": "text", "text": "What happens in this clip?"},
        {"type": "video_url", "video_url": {"url": uri, **opts}},
    ]}]


r = client.chat.completions.create(model=model, messages=video_messages(video_uri(VIDEO), fps=1,
                                                                        max_frames=3),
                                   max_tokens=3, temperature=0)
check("openai video_url", r.choices[0].message.content is not None
      and 3 * IMAGE_TOKENS < r.usage.prompt_tokens < 4 * IMAGE_TOKENS, r.usage)
# Through extra_body (the client's way to send fields it has no type for); the defaults take
# 1 frame a second: 4 frames of the 4 s clip.
r4 = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": "placeholder"}], max_tokens=3,
    temperature=0, extra_body={"messages": video_messages(video_uri(VIDEO))})
check("openai video_url defaults (extra_body)",
      4 * IMAGE_TOKENS < r4.usage.prompt_tokens < 5 * IMAGE_TOKENS, r4.usage)
# Streaming.
parts = list(client.chat.completions.create(
    model=model, messages=video_messages(video_uri(VIDEO), max_frames=2), max_tokens=2,
    temperature=0, stream=True, stream_options={"include_usage": True}))
check("openai video stream", parts[-1].usage.prompt_tokens > 2 * IMAGE_TOKENS, parts[-1].usage)


def post_chat(messages, m=model):
    return requests.post(base + "/v1/chat/completions",
                         json={"model": m, "messages": messages, "max_tokens": 2})


bad("video fps 0", post_chat(video_messages(video_uri(VIDEO), fps=0)), "fps must be in")
bad("video fps 61", post_chat(video_messages(video_uri(VIDEO), fps=61)), "fps must be in")
bad("video max_frames 65", post_chat(video_messages(video_uri(VIDEO), max_frames=65)),
    "max_frames")
bad("video max_frames 0", post_chat(video_messages(video_uri(VIDEO), max_frames=0)),
    "max_frames")
bad("video http url", post_chat(video_messages("http://example.invalid/clip.mp4")), "not fetched")
bad("video garbage", post_chat(video_messages(video_uri(b"\0\0\0\x10ftypisom garbage"))),
    "video 0")
bad("video not base64", post_chat(video_messages("data:video/mp4;base64,@@@@")), "base64")
bad("video unsupported codec", post_chat(video_messages(video_uri(read(f"{media}/hevc.mp4")))),
    "HEVC", status=415)
bad("video unsupported container",
    post_chat(video_messages(video_uri(read(f"{media}/vp9.webm"), "webm"))), "WebM", status=415)
bad("video on the text-only model", post_chat(video_messages(video_uri(VIDEO)), text_model),
    "does not accept images", code="vision_not_supported")
bad("video frames past the context",
    post_chat(video_messages(video_uri(read(f"{media}/h264_high_moving.mp4")), fps=30,
                             max_frames=20)), "context holds", code="context_length_exceeded")
r = client.chat.completions.create(model=model, messages=video_messages(video_uri(VIDEO),
                                                                        max_frames=1),
                                   max_tokens=2, temperature=0)
check("video after errors", r.usage.prompt_tokens > IMAGE_TOKENS, r.usage)

# --- chat UI: a video upload becomes frames (image uploads with their times)
v = session()
up = upload(v, "clip.mp4", VIDEO)
check("upload video", up.status_code == 200, up.text)
u = up.json()
check("video reply", u["mediaType"] == "video" and len(u["frames"]) == 4
      and len(u["frameUrls"]) == 4 and u["frameTimes"] == [0.0, 1.0, 2.0, 3.0], u)
frame = requests.get(base + u["frameUrls"][1])
check("frame download", frame.status_code == 200 and frame.content.startswith(b"\x89PNG"),
      frame.status_code)
done, _ = done_frame(ui_chat(v, {"role": "user", "content": "What happens?",
                                 "imagePaths": u["frames"][:3], "isVideo": True}))
check("isVideo frames reach the model", 3 * IMAGE_TOKENS < done["promptTokens"] < 4 * IMAGE_TOKENS,
      done)
hist = requests.get(f"{base}/api/sessions/{v}").json()["messages"][0]["content"]
labels = [p["text"] for p in hist if p["type"] == "text"]
check("frames labelled with their times",
      labels[:3] == ["Frame at 0.0 s:", "Frame at 1.0 s:", "Frame at 2.0 s:"], labels)
for name in ["hevc.mp4", "vp9.webm"]:
    r = upload(v, name, read(f"{media}/{name}"))
    check(f"upload {name} refused", r.status_code == 415 and
          ("HEVC" in r.json()["error"] or "WebM" in r.json()["error"]), r.text)
r = upload(v, "broken.mp4", b"\0\0\0\x10ftypisom garbage")
check("upload corrupt video", r.status_code == 422, r.text)
check("still serving", requests.get(base + "/health").status_code == 200)
print("ALL OK")
