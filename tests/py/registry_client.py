"""Drives one `weft serve --models-dir D --max-loaded 2` holding three models with the official
`ollama` Python client: list, chats alternating among the models (each reply equal to the
reply of a server holding only that model), ps, create, copy, delete, keep_alive=0.

Usage: registry_client.py BASE_URL EXPECTED_JSON PROMPT
  EXPECTED_JSON: {"model name": "greedy reply to PROMPT with num_predict 12", ...}
"""
import json
import sys
import time

import ollama

from common import check

base, expected, prompt = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
client = ollama.Client(host=base, timeout=600)
OPTS = {"temperature": 0, "num_predict": 12}
MSG = [{"role": "user", "content": prompt}]
names = sorted(expected)


def listed():
    return sorted(m.model for m in client.list().models)


def resident():
    return sorted(m.model for m in client.ps().models)


def eventually(what, cond):
    for _ in range(300):
        if cond():
            return True
        time.sleep(0.1)
    check(what, False, "timed out")


check("list shows all three", all(n + ":latest" in listed() for n in names), listed())

for round_ in range(2):
    for n in names:
        tag = n if round_ == 0 else n + ":latest"
        r = client.chat(model=tag, messages=MSG, options=OPTS)
        check(f"chat {tag} equals the single-model server", r.message.content == expected[n],
              (r.message.content, expected[n]))
        check("the reply names its model", r.model.startswith(n), r.model)
        check(f"at most two resident after {tag}", len(resident()) <= 2, resident())
        check(f"{n} is resident after its chat", n + ":latest" in resident(), resident())

# A named variant with its own system prompt and parameters.
base_model = names[-1]
client.create(model="pirate", from_=base_model,
              system="You are a pirate. Always answer like a pirate, with 'Arr!'.",
              parameters={"temperature": 0, "num_predict": 12})
check("create lists the variant", "pirate:latest" in listed(), listed())
sh = client.show("pirate")
# The client's ShowResponse has no `system` field; the modelfile carries it.
check("show has the system prompt", "SYSTEM" in sh.modelfile and "pirate" in sh.modelfile,
      sh)
p1 = client.chat(model="pirate", messages=MSG)
p2 = client.chat(model="pirate", messages=MSG)
check("the variant's parameters apply (greedy, 12 tokens)", p1.message.content == p2.message.content
      and p1.eval_count <= 12, (p1, p2))
check("the variant's system prompt applies", p1.message.content != expected[base_model],
      p1.message.content)
check("the variant shares its file's loaded model", len(resident()) <= 2, resident())

# Copy and delete.
src = names[0]
client.copy(src, "copied")
check("copy lists the new name", "copied:latest" in listed(), listed())
c = client.chat(model="copied", messages=MSG, options=OPTS)
check("the copy answers as its source", c.message.content == expected[src], c.message.content)
check("delete", client.delete("copied").status == "success")
check("delete removes the name", "copied:latest" not in listed(), listed())
try:
    client.chat(model="copied", messages=MSG, options=OPTS)
    check("a deleted name is gone", False)
except ollama.ResponseError as e:
    check("a deleted name is a 404", e.status_code == 404, e)
check("the source survives its copy's deletion", src + ":latest" in listed(), listed())

# keep_alive=0 unloads; an empty request with a keep_alive loads.
loaded = next(n for n in names if n + ":latest" in resident())
client.generate(model=loaded, prompt="", keep_alive=0)
eventually("keep_alive=0 unloads", lambda: loaded + ":latest" not in resident())
r = client.generate(model=loaded, prompt="", keep_alive="10m")
check("an empty generate loads", r.done and loaded + ":latest" in resident(), (r, resident()))
r = client.chat(model=loaded, messages=MSG, options=OPTS, keep_alive=0)
check("a chat with keep_alive=0 answers", r.message.content == expected[loaded], r)
eventually("and then unloads", lambda: loaded + ":latest" not in resident())

try:
    client.chat(model="no-such-model", messages=MSG)
    check("unknown model", False)
except ollama.ResponseError as e:
    check("unknown model is a 404 listing the models", e.status_code == 404
          and names[0] in str(e), e)

print("ALL OK")
