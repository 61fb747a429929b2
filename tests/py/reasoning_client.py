"""Reasoning apart from the answer, through the official `ollama` and `openai` clients.

Usage: reasoning_client.py BASE_URL MODEL_NAME
MODEL_NAME is Qwen2.5-Coder 0.5B, whose own template marks no reasoning. The script makes a
thinking model of it with the real client's `create` (a DeepSeek-R1 / Qwen3-style template: the
generation prompt opens `<think>`, and `enable_thinking: false` closes the block empty, as
Qwen3's template does), then checks that the reasoning arrives in `message.thinking` (Ollama)
and `reasoning_content` (OpenAI), streamed and not, never in the answer text. Greedy decoding
throughout, so the same prompt gives the same text on every surface.
"""
import json
import sys

import ollama

from common import check, openai_client

base, plain = sys.argv[1], sys.argv[2]
client = openai_client(base, 900)
oll = ollama.Client(host=base, timeout=900)

TEMPLATE = """{%- for message in messages %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{%- if enable_thinking is defined and enable_thinking is false %}
<think>

</think>

{% else %}
<think>
{% endif %}
{%- endif %}"""

# One worked example shows the small model the shape: reasoning, `</think>`, then the answer.
ASK = [
    {"role": "system", "content": "You are a helpful assistant. First reason step by step inside <think> and </think>. After </think>, always write the final answer."},
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": "<think>\n2 plus 3 is 5.\n</think>\n\nThe answer is 5."},
    {"role": "user", "content": "What is 4 + 4?"},
]
OPTS = {"temperature": 0, "num_predict": 48}
TAGS = ("<think>", "</think>")


def no_tags(name, text):
    check(name + " has no reasoning tags", not any(t in (text or "") for t in TAGS), text)


oll.create(model="thinker", from_=plain, template=TEMPLATE, stream=False)
check("show: thinking capability", "thinking" in (oll.show("thinker").capabilities or []),
      oll.show("thinker").capabilities)
check("show: the plain model does not think", "thinking" not in (oll.show(plain).capabilities or []),
      oll.show(plain).capabilities)

# --- Ollama, think=True, whole.
r = oll.chat(model="thinker", messages=ASK, think=True, options=OPTS)
thinking, answer = r.message.thinking or "", r.message.content or ""
print("SPLIT " + json.dumps({"thinking": thinking, "answer": answer}))
check("ollama thinking present", thinking.strip() != "", r.message)
check("ollama answer present", answer.strip() != "", r.message)
no_tags("ollama thinking", thinking)
no_tags("ollama answer", answer)
check("ollama answer says 8", "8" in answer, answer)

# --- Ollama, think=True, streamed: the pieces add up to the same split.
st_thinking, st_answer = "", ""
for part in oll.chat(model="thinker", messages=ASK, think=True, options=OPTS, stream=True):
    st_thinking += part.message.thinking or ""
    st_answer += part.message.content or ""
check("ollama streamed thinking == whole", st_thinking == thinking, (st_thinking, thinking))
check("ollama streamed answer == whole", st_answer == answer, (st_answer, answer))

# --- Ollama, think=False: the template closes the block; no reasoning comes back.
r = oll.chat(model="thinker", messages=ASK, think=False, options=OPTS)
check("ollama think=False: no thinking", not r.message.thinking, r.message)
check("ollama think=False: an answer", (r.message.content or "").strip() != "", r.message)
no_tags("ollama think=False answer", r.message.content)

# --- Ollama /api/generate splits the same way.
g = oll.generate(model="thinker", prompt="What is 4 + 4?", think=True, options=OPTS)
check("generate thinking present", (g.thinking or "").strip() != "", g)
no_tags("generate response", g.response)

# --- A model that writes no reasoning: think=True is a 400, as Ollama answers.
try:
    oll.chat(model=plain, messages=ASK, think=True, options=OPTS)
    check("think on a plain model refused", False)
except ollama.ResponseError as e:
    check("think on a plain model refused", e.status_code == 400 and "thinking" in str(e), e)

# --- OpenAI chat: the same prompt (the template's default opens the block), so the same split.
c = client.chat.completions.create(model="thinker", messages=ASK, temperature=0, max_tokens=48)
msg = c.choices[0].message
reasoning = getattr(msg, "reasoning_content", None) or ""
check("openai reasoning_content == ollama thinking", reasoning == thinking, (reasoning, thinking))
check("openai content == ollama answer", msg.content == answer, (msg.content, answer))

# --- OpenAI streamed: reasoning_content deltas, then content; usage on the final chunk even
# without stream_options (as the peer document shows), and OpenAI's own usage chunk with it.
s_reasoning, s_content, finals = "", "", []
chunks = list(client.chat.completions.create(model="thinker", messages=ASK, temperature=0,
                                             max_tokens=48, stream=True))
for ch in chunks:
    for choice in ch.choices:
        s_reasoning += getattr(choice.delta, "reasoning_content", None) or ""
        s_content += choice.delta.content or ""
        if choice.finish_reason:
            finals.append(ch)
check("openai streamed reasoning == whole", s_reasoning == reasoning, (s_reasoning, reasoning))
check("openai streamed content == whole", s_content == msg.content, (s_content, msg.content))
check("one finish chunk", len(finals) == 1, finals)
u = finals[0].usage
check("final chunk carries usage", u is not None and u.completion_tokens == c.usage.completion_tokens
      and u.prompt_tokens == c.usage.prompt_tokens, (u, c.usage))
check("no usage-only chunk without include_usage", all(ch.choices for ch in chunks), chunks[-1])
with_usage = list(client.chat.completions.create(model="thinker", messages=ASK, temperature=0, max_tokens=48,
                                                 stream=True, stream_options={"include_usage": True}))
check("include_usage adds its own chunk", with_usage[-1].choices == [] and
      with_usage[-1].usage.completion_tokens == c.usage.completion_tokens, with_usage[-1])

# --- OpenAI switches: chat_template_kwargs and reasoning_effort="none" both close the block.
for name, extra in [("chat_template_kwargs", {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}),
                    ("reasoning_effort none", {"reasoning_effort": "none"})]:
    c2 = client.chat.completions.create(model="thinker", messages=ASK, temperature=0, max_tokens=48, **extra)
    m2 = c2.choices[0].message
    check(name + ": no reasoning_content", not getattr(m2, "reasoning_content", None), m2)
    check(name + ": an answer", (m2.content or "").strip() != "", m2)
    no_tags(name + " answer", m2.content)

# --- Structured output cannot think: with the switch it is turned off, asking for both is a 400.
j = client.chat.completions.create(model="thinker", messages=ASK, temperature=0, max_tokens=32,
                                   response_format={"type": "json_object"})
check("json mode: no reasoning_content", not getattr(j.choices[0].message, "reasoning_content", None), j)
check("json mode: JSON text", j.choices[0].message.content.strip().startswith("{"), j)
try:
    client.chat.completions.create(model="thinker", messages=ASK, max_tokens=8, extra_body={"think": True},
                                   response_format={"type": "json_object"})
    check("think + json refused", False)
except Exception as e:  # openai.BadRequestError
    check("think + json refused", getattr(e, "status_code", None) == 400, e)
try:
    client.chat.completions.create(model="thinker", messages=ASK, max_tokens=8, reasoning_effort="lots")
    check("bad reasoning_effort refused", False)
except Exception as e:
    check("bad reasoning_effort refused", getattr(e, "status_code", None) == 400, e)

print("ALL OK")
