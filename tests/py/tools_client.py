"""Tool calling and structured output against `weft serve`, with the official `openai` and
`ollama` Python clients.

Usage: tools_client.py BASE_URL MODEL_NAME
Run on an instruct model whose chat template renders `tools` (Qwen 2.5). Everything is greedy,
so the model's choices are deterministic; every check asserts and prints one line.
"""
import json
import sys

import ollama
import openai

from common import check, openai_client, weather_tool

base, model = sys.argv[1], sys.argv[2]
client = openai_client(base, 900)
oll = ollama.Client(host=base, timeout=900)

WEATHER = weather_tool(["city"])
ASK = [{"role": "user", "content": "What is the weather like in Paris right now?"}]


def check_weather_args(name, args):
    check(name + " arguments object", isinstance(args, dict), args)
    city = next((v for v in args.values() if isinstance(v, str) and "paris" in v.lower()), None)
    check(name + " arguments name Paris", city is not None, args)


# --- OpenAI tools, non-streaming.
r = client.chat.completions.create(model=model, messages=ASK, tools=[WEATHER], temperature=0, max_tokens=64)
choice = r.choices[0]
calls = choice.message.tool_calls
check("openai finish_reason tool_calls", choice.finish_reason == "tool_calls", choice)
check("openai one call", calls is not None and len(calls) >= 1, choice.message)
call = calls[0]
check("openai call shape", call.type == "function" and call.id and call.function.name == "get_weather", call)
args = json.loads(call.function.arguments)
check_weather_args("openai", args)

# --- OpenAI tools, streaming: the deltas add up to the same call.
acc = {}
finish = None
content = ""
for chunk in client.chat.completions.create(model=model, messages=ASK, tools=[WEATHER], temperature=0,
                                            max_tokens=64, stream=True):
    if not chunk.choices:
        continue
    d = chunk.choices[0].delta
    content += d.content or ""
    for tc in d.tool_calls or []:
        e = acc.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
        e["id"] = tc.id or e["id"]
        if tc.function:
            e["name"] += tc.function.name or ""
            e["arguments"] += tc.function.arguments or ""
    finish = chunk.choices[0].finish_reason or finish
check("stream finish_reason tool_calls", finish == "tool_calls", finish)
check("stream call name", acc and acc[0]["name"] == "get_weather" and acc[0]["id"], acc)
check("stream args == non-stream args", json.loads(acc[0]["arguments"]) == args, (acc, args))
check("stream no stray content", content.strip() == (choice.message.content or "").strip(), content)

# --- The tool's result goes back into the conversation; the model answers in text.
follow = ASK + [
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": "get_weather", "arguments": call.function.arguments}}]},
    {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 18, "condition": "sunny"})},
]
r2 = client.chat.completions.create(model=model, messages=follow, tools=[WEATHER], temperature=0, max_tokens=40)
text = r2.choices[0].message.content or ""
check("tool result answered in text", r2.choices[0].finish_reason in ("stop", "length") and "18" in text, r2.choices[0])

# --- tool_choice none: no tools offered, plain text.
r3 = client.chat.completions.create(model=model, messages=ASK, tools=[WEATHER], tool_choice="none", temperature=0,
                                    max_tokens=8)
check("tool_choice none", r3.choices[0].message.tool_calls is None and r3.choices[0].finish_reason != "tool_calls",
      r3.choices[0])

# --- Bad tools: 400 in OpenAI's shape.
try:
    client.chat.completions.create(model=model, messages=ASK, tools=[{"type": "function", "function": {}}])
    raise AssertionError("a tool without a name was accepted")
except openai.BadRequestError as e:
    check("bad tool 400", e.status_code == 400 and "name" in e.message, e)

# --- Ollama tools, non-streaming and streaming.
o = oll.chat(model=model, messages=ASK, tools=[WEATHER], options={"temperature": 0, "num_predict": 64})
tc = o.message.tool_calls
check("ollama tool_calls", tc and tc[0].function.name == "get_weather", o.message)
check_weather_args("ollama", dict(tc[0].function.arguments))
check("ollama args == openai args", dict(tc[0].function.arguments) == args, (tc[0].function.arguments, args))
streamed = []
for part in oll.chat(model=model, messages=ASK, tools=[WEATHER], options={"temperature": 0, "num_predict": 64},
                     stream=True):
    streamed.extend(part.message.tool_calls or [])
check("ollama stream tool_calls", len(streamed) == len(tc) and streamed[0].function.name == "get_weather", streamed)
# The call and the tool's answer as history (Ollama shapes: arguments as an object, tool_name).
o2 = oll.chat(model=model, messages=ASK + [
    {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather", "arguments": args}}]},
    {"role": "tool", "content": json.dumps({"temperature": 18, "condition": "sunny"}), "tool_name": "get_weather"}],
    tools=[WEATHER], options={"temperature": 0, "num_predict": 40})
check("ollama tool result answered", "18" in (o2.message.content or ""), o2.message)

# --- Structured output.
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "languages": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "employed": {"type": "boolean"},
        "level": {"enum": ["junior", "senior"]},
    },
    "required": ["name", "age", "employed", "level"],
    "additionalProperties": False,
}
TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}


def conforms(v, s):
    """A validator for the schema subset used here."""
    if "enum" in s:
        return v in s["enum"]
    t = s.get("type")
    if t == "integer" and isinstance(v, bool) or t == "number" and isinstance(v, bool):
        return False
    if t and not isinstance(v, TYPES[t]):
        return False
    if t == "object":
        props = s.get("properties", {})
        if not all(k in v for k in s.get("required", [])):
            return False
        if s.get("additionalProperties") is False and any(k not in props for k in v):
            return False
        return all(conforms(v[k], props[k]) for k in v if k in props)
    if t == "array":
        return len(v) <= s.get("maxItems", len(v)) and all(conforms(x, s.get("items", {})) for x in v)
    return True


DESCRIBE = [{"role": "user", "content": "Describe a fictional software engineer as JSON."}]
CAPITAL = [{"role": "user", "content": "What is the capital of France? Answer in JSON."}]
r = client.chat.completions.create(model=model, messages=CAPITAL, temperature=0, max_tokens=60,
                                   response_format={"type": "json_object"})
obj = json.loads(r.choices[0].message.content)
check("json_object parses", isinstance(obj, dict) and r.choices[0].finish_reason == "stop", r.choices[0])

fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
r = client.chat.completions.create(model=model, messages=DESCRIBE, temperature=0, max_tokens=120,
                                   response_format=fmt)
person = json.loads(r.choices[0].message.content)
check("json_schema conforms", conforms(person, PERSON) and r.choices[0].finish_reason == "stop", person)
parts = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
    model=model, messages=DESCRIBE, temperature=0, max_tokens=120, response_format=fmt, stream=True)
    if c.choices]
check("json_schema streamed == non-streamed", json.loads("".join(parts)) == person, parts)
# Sampling at temperature 1 stays valid too (a small schema, so it completes quickly).
FLAG = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
r = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": "Is the sky blue? Answer in JSON."}], temperature=1.0,
    seed=7, max_tokens=40, response_format={"type": "json_schema", "json_schema": {"name": "flag", "schema": FLAG}})
check("json_schema sampled conforms", r.choices[0].finish_reason == "stop" and
      conforms(json.loads(r.choices[0].message.content), FLAG), r.choices[0])

try:
    client.chat.completions.create(model=model, messages=DESCRIBE, max_tokens=4, response_format={
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": True}}})
    raise AssertionError("an unsupported keyword was accepted")
except openai.BadRequestError as e:
    check("unsupported schema keyword 400", e.status_code == 400 and "uniqueItems" in e.message, e)

o = oll.chat(model=model, messages=CAPITAL, format="json", options={"temperature": 0, "num_predict": 60})
check("ollama format json", isinstance(json.loads(o.message.content), dict) and o.done_reason == "stop",
      o.message.content)
o = oll.chat(model=model, messages=DESCRIBE, format=PERSON, options={"temperature": 0, "num_predict": 120})
check("ollama format schema conforms", conforms(json.loads(o.message.content), PERSON), o.message.content)
g = oll.generate(model=model, prompt="List two primary colors as a JSON array.",
                 format={"type": "array", "items": {"type": "string"}}, options={"temperature": 0, "num_predict": 40})
check("ollama generate format schema", isinstance(json.loads(g.response), list), g.response)
try:
    oll.chat(model=model, messages=DESCRIBE, format={"type": "object", "minProperties": 1})
    raise AssertionError("an unsupported keyword was accepted")
except ollama.ResponseError as e:
    check("ollama unsupported keyword 400", e.status_code == 400 and "minProperties" in str(e), e)

print("ALL OK")
