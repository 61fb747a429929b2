"""Forced tool calls (`tool_choice` "required" and a named function) against `weft serve`, with
the official `openai` Python client.

Usage: tool_choice_client.py BASE_URL MODEL_NAME
The prompts ask for things no offered tool does (a joke, a greeting), so without forcing the
model would answer in text: every call below exists only because tool_choice forced it. Checks
that the reply ends with finish_reason "tool_calls", calls the right tool, and that its
arguments parse and satisfy the tool's parameters schema, streaming and not. Greedy, so
streamed and non-streamed replies must be identical. Every check asserts and prints one line.
"""
import json
import sys

import openai

from common import check, openai_client, weather_tool

base, model = sys.argv[1], sys.argv[2]
client = openai_client(base, 900)

WEATHER = weather_tool(["city", "unit"])
FLIGHT = {
    "type": "function",
    "function": {
        "name": "book_flight",
        "description": "Book a flight for some passengers",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string"},
                "destination": {"type": "string"},
                "passengers": {"type": "integer"},
                "cabin": {"enum": ["economy", "business"]},
                "stops": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "flexible": {"type": "boolean"},
            },
            "required": ["origin", "destination", "passengers", "cabin", "flexible"],
            "additionalProperties": False,
        },
    },
}
# A tool without parameters: any arguments object.
PING = {"type": "function", "function": {"name": "ping", "description": "Check the connection"}}
TOOLS = [WEATHER, FLIGHT, PING]
SCHEMAS = {t["function"]["name"]: t["function"].get("parameters", {"type": "object"}) for t in TOOLS}
JOKE = [{"role": "user", "content": "Tell me a short joke about cats."}]
HELLO = [{"role": "user", "content": "Say hello."}]
TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}


def conforms(v, s):
    """A validator for the schema subset used here."""
    if "enum" in s:
        return v in s["enum"]
    t = s.get("type")
    if t in ("integer", "number") and isinstance(v, bool):
        return False
    if t and not isinstance(v, TYPES[t]):
        return False
    if t == "object":
        props = s.get("properties", {})
        if not all(k in v for k in s.get("required", [])):
            return False
        if props and s.get("additionalProperties", False) is False and any(k not in props for k in v):
            return False
        return all(conforms(v[k], props[k]) for k in v if k in props)
    if t == "array":
        return len(v) <= s.get("maxItems", len(v)) and all(conforms(x, s.get("items", {})) for x in v)
    return True


def check_call(name, finish, calls, allowed):
    """One call to an allowed tool whose arguments satisfy its schema; returns (name, args)."""
    check(name + " finish_reason tool_calls", finish == "tool_calls", finish)
    check(name + " one call", len(calls) == 1, calls)
    fn, raw = calls[0]
    check(name + " tool allowed", fn in allowed, fn)
    args = json.loads(raw)
    check(name + " arguments satisfy the schema", conforms(args, SCHEMAS[fn]), (fn, args))
    return fn, args


def plain(messages, tools, choice, **kw):
    r = client.chat.completions.create(model=model, messages=messages, tools=tools, tool_choice=choice,
                                       temperature=0, max_tokens=96, **kw)
    c = r.choices[0]
    calls = [(t.function.name, t.function.arguments) for t in c.message.tool_calls or []]
    check("call has an id and type", all(t.id and t.type == "function" for t in c.message.tool_calls or []))
    return c.finish_reason, calls, c.message.content


def streamed(messages, tools, choice):
    acc, finish, content = {}, None, ""
    for chunk in client.chat.completions.create(model=model, messages=messages, tools=tools, tool_choice=choice,
                                                temperature=0, max_tokens=96, stream=True):
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        content += d.content or ""
        for tc in d.tool_calls or []:
            e = acc.setdefault(tc.index, {"name": "", "arguments": ""})
            if tc.function:
                e["name"] += tc.function.name or ""
                e["arguments"] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    calls = [(e["name"], e["arguments"]) for _, e in sorted(acc.items())]
    return finish, calls, content


# --- Without forcing, the model answers the joke in text (shown, not asserted: it is the model's choice).
r = client.chat.completions.create(model=model, messages=JOKE, tools=TOOLS, temperature=0, max_tokens=24)
print("info auto:", r.choices[0].finish_reason, repr(r.choices[0].message.content))

# --- A named function, non-streaming and streaming.
for fn_name in ["get_weather", "book_flight", "ping"]:
    choice = {"type": "function", "function": {"name": fn_name}}
    finish, calls, content = plain(JOKE, TOOLS, choice)
    got = check_call(f"named {fn_name}", finish, calls, [fn_name])
    check(f"named {fn_name} no content", not content, content)
    s_finish, s_calls, s_content = streamed(JOKE, TOOLS, choice)
    s_got = check_call(f"named {fn_name} stream", s_finish, s_calls, [fn_name])
    check(f"named {fn_name} stream == non-stream", s_got == got, (s_got, got))
    check(f"named {fn_name} stream no content", not s_content, s_content)

# --- "required": some offered tool, even for a greeting.
finish, calls, _ = plain(HELLO, [WEATHER, FLIGHT], "required")
got = check_call("required", finish, calls, ["get_weather", "book_flight"])
s_finish, s_calls, _ = streamed(HELLO, [WEATHER, FLIGHT], "required")
check("required stream == non-stream", check_call("required stream", s_finish, s_calls,
                                                  ["get_weather", "book_flight"]) == got)

# --- n > 1 and sampling: every choice is a valid forced call.
r = client.chat.completions.create(model=model, messages=JOKE, tools=TOOLS, temperature=1.0, seed=3, n=2,
                                   max_tokens=96, tool_choice={"type": "function", "function": {"name": "get_weather"}})
for i, c in enumerate(r.choices):
    check_call(f"sampled choice {i}", c.finish_reason,
               [(t.function.name, t.function.arguments) for t in c.message.tool_calls or []], ["get_weather"])

# --- Errors: 400 in OpenAI's shape, naming the problem.
try:
    client.chat.completions.create(model=model, messages=JOKE, tools=TOOLS,
                                   tool_choice={"type": "function", "function": {"name": "launch_rocket"}})
    raise AssertionError("an unknown tool name was accepted")
except openai.BadRequestError as e:
    check("unknown tool 400", e.status_code == 400 and "launch_rocket" in e.message and "get_weather" in e.message, e)
try:
    client.chat.completions.create(model=model, messages=JOKE, tool_choice="required")
    raise AssertionError("tool_choice required without tools was accepted")
except openai.BadRequestError as e:
    check("required without tools 400", e.status_code == 400 and "tools" in e.message, e)
try:
    client.chat.completions.create(model=model, messages=JOKE, tools=TOOLS, tool_choice="sometimes")
    raise AssertionError("a bad tool_choice was accepted")
except openai.BadRequestError as e:
    check("bad tool_choice 400", e.status_code == 400 and "sometimes" in e.message, e)

print("ALL OK")
