"""The official `openai` client against a server that requires keys: BASE MODEL USER_KEY
READONLY_KEY. A user key lists models and chats; a wrong key raises AuthenticationError; a
readonly key may list but not chat (PermissionDeniedError)."""
import sys

import openai

from common import check

base, model, user_key, readonly_key = sys.argv[1:5]


def client(key):
    return openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=300)


c = client(user_key)
ids = [m.id for m in c.models.list()]
check("models listed with a user key", model in ids, ids)
r = c.chat.completions.create(
    model=model, max_tokens=8, messages=[{"role": "user", "content": "Say hi"}]
)
check("chat with a user key", isinstance(r.choices[0].message.content, str), r)

try:
    client("weft_not-a-key-this-server-made").models.list()
    check("a wrong key is refused", False)
except openai.AuthenticationError as e:
    check("a wrong key raises AuthenticationError", e.status_code == 401, e)
    check("its code is invalid_api_key", e.code == "invalid_api_key", e.body)

ro = client(readonly_key)
check("readonly lists models", model in [m.id for m in ro.models.list()])
try:
    ro.chat.completions.create(
        model=model, max_tokens=4, messages=[{"role": "user", "content": "Hi"}]
    )
    check("readonly may not chat", False)
except openai.PermissionDeniedError as e:
    check("readonly chat raises PermissionDeniedError", e.status_code == 403, e)

print("ALL OK")
