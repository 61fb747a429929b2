"""Creates a model on `weft serve` from a Hugging Face folder with the official `ollama` Python
client, as its documentation shows: `create_blob(path)` for every file, then
`create(model, files={name: digest})`, streaming the status lines; then lists the model and
chats with it. Bad input: an unknown digest and a body that does not match its digest are
400s with a message, and leave no model and no blob.

Usage: create_client.py BASE_URL HF_FOLDER NAME
"""
import hashlib
import os
import sys

import httpx
import ollama

from common import check

base, folder, name = sys.argv[1], sys.argv[2], sys.argv[3]
client = ollama.Client(host=base, timeout=600)

files = {}
for f in sorted(os.listdir(folder)):
    files[f] = client.create_blob(os.path.join(folder, f))
check("every file is a blob", all(d.startswith("sha256:") for d in files.values()), files)
check("the folder has weights", any(f.endswith(".safetensors") for f in files), list(files))
head = httpx.head(f"{base}/api/blobs/{files['config.json']}")
check("an uploaded blob is there (HEAD 200)", head.status_code == 200, head.status_code)

updates = list(client.create(model=name, files=files, stream=True))
statuses = [u.status for u in updates]
check("it starts converting", statuses[0] == "converting model", statuses[:3])
check("it ends with success", statuses[-1] == "success", statuses[-3:])
check("a manifest line comes before success", "writing manifest" in statuses, statuses[-3:])

listed = [m.model for m in client.list().models]
check("the created model is listed", name + ":latest" in listed, listed)
r = client.chat(model=name, messages=[{"role": "user", "content": "Say hi."}],
                options={"temperature": 0, "num_predict": 4})
check("the created model answers", len(r.message.content) > 0, r.message.content)

# An unknown digest: 400 naming it, no model.
unknown = "sha256:" + "0" * 64
try:
    client.create(model="never", files={"config.json": unknown}, stream=False)
    check("an unknown blob is refused", False, "no error")
except ollama.ResponseError as e:
    check("an unknown blob is refused", e.status_code == 400 and unknown in str(e), (e.status_code, str(e)))
listed = [m.model for m in client.list().models]
check("nothing was made", "never:latest" not in listed, listed)

# Bytes that do not hash to the digest named: 400, and no blob stays under either digest.
body = b"not the bytes the digest names"
claimed = "sha256:" + hashlib.sha256(b"other bytes").hexdigest()
r = httpx.post(f"{base}/api/blobs/{claimed}", content=body)
check("a digest mismatch is a 400", r.status_code == 400 and "mismatch" in r.text, (r.status_code, r.text))
check("the mismatched blob was not kept", httpx.head(f"{base}/api/blobs/{claimed}").status_code == 404)
real = "sha256:" + hashlib.sha256(body).hexdigest()
check("nor under its real digest", httpx.head(f"{base}/api/blobs/{real}").status_code == 404)
r = httpx.post(f"{base}/api/blobs/sha256:xyz", content=body)
check("a malformed digest is a 400", r.status_code == 400 and "64 hex" in r.text, (r.status_code, r.text))
