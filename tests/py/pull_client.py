"""Pulls a model through `weft serve` with the official `ollama` Python client, streaming
progress, then chats with it.

Usage: pull_client.py BASE_URL REFERENCE NAME
  REFERENCE: what to pull (a URL or hf.co/OWNER/REPO:FILE served by the test hub)
  NAME: the name the pulled model is listed under
"""
import sys

import ollama

from common import check

base, reference, name = sys.argv[1], sys.argv[2], sys.argv[3]
client = ollama.Client(host=base, timeout=600)

updates = list(client.pull(reference, stream=True))
statuses = [u.status for u in updates]
check("the first line is the manifest", statuses[0] == "pulling manifest", statuses[:3])
check("the last line is success", statuses[-1] == "success", statuses[-3:])
progress = [u for u in updates if u.total]
check("progress lines carry total and completed", len(progress) >= 2, len(progress))
done = [u.completed or 0 for u in progress]
check("completed never goes back", all(a <= b for a, b in zip(done, done[1:])), done[:10])
check("completed reaches total", done[-1] == progress[-1].total, (done[-1], progress[-1].total))
check("the digest is a sha256", all((u.digest or "").startswith("sha256:") and len(u.digest) == 71 for u in progress), progress[0].digest)
check("verifying is reported", "verifying sha256 digest" in statuses, statuses[-4:])

listed = [m.model for m in client.list().models]
check("the pulled model is listed", name + ":latest" in listed, listed)
r = client.chat(model=name, messages=[{"role": "user", "content": "Say hi."}],
                options={"temperature": 0, "num_predict": 4})
check("the pulled model answers", len(r.message.content) > 0, r.message.content)

try:
    list(client.pull("hf.co/t/missing:nothing.gguf", stream=True))
    check("a missing model fails the pull", False, "no error")
except ollama.ResponseError as e:
    check("a missing model fails the pull", "404" in str(e), str(e))
