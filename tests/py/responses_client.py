"""The Responses API (`/v1/responses`) against `weft serve`, with the official `openai` Python
client: create, both ways of streaming, a tool round trip, structured output, continuing a
conversation with `previous_response_id` (from the prefix cache), stored responses and bad input.

Usage: responses_client.py BASE_URL MODEL_NAME
Run on Qwen 2.5 (its chat template renders tools). Greedy throughout; every check asserts and
prints one line.
"""
import json
import sys

import openai
from pydantic import BaseModel

from common import check, openai_client, weather_tool

base, model = sys.argv[1], sys.argv[2]
client = openai_client(base, 900)

# The weather tool in the Responses API's flat shape.
WEATHER = {"type": "function", **weather_tool(["city"])["function"], "strict": False}
ASK_WEATHER = "What is the weather like in Paris right now?"
CAPITAL = "What is the capital of France? Answer in one word."

# --- create: text, usage, echoed fields.
r = client.responses.create(model=model, input=CAPITAL, temperature=0, max_output_tokens=16,
                            metadata={"suite": "responses"})
check("create object", r.object == "response" and r.id.startswith("resp_") and r.status == "completed", r)
check("output_text", "paris" in r.output_text.lower(), r.output_text)
msg = r.output[0]
check("message item", msg.type == "message" and msg.role == "assistant" and msg.id.startswith("msg_")
      and msg.status == "completed" and msg.content[0].type == "output_text" and msg.content[0].annotations == [],
      r.output)
u = r.usage
check("usage", u.input_tokens > 0 and 0 < u.output_tokens <= 16 and u.total_tokens == u.input_tokens + u.output_tokens
      and u.output_tokens_details.reasoning_tokens == 0 and u.input_tokens_details.cached_tokens >= 0, u)
check("echo", r.metadata == {"suite": "responses"} and r.temperature == 0 and r.tool_choice == "auto"
      and r.tools == [] and r.parallel_tool_calls is True and r.text.format.type == "text"
      and r.previous_response_id is None and r.model == model, r)
text_answer = r.output_text

r = client.responses.create(model=model, input="Write a long poem about the sea.", temperature=0, max_output_tokens=5)
check("incomplete at max_output_tokens", r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
      and r.usage.output_tokens == 5 and r.output[0].status == "incomplete" and r.output_text, r)

r = client.responses.create(model=model, instructions="You answer every question with the single word BANANA.",
                            input=[{"role": "user", "content": [{"type": "input_text", "text": "What is 2+2?"}]}],
                            temperature=0, max_output_tokens=8)
check("instructions", "banana" in r.output_text.lower() and r.instructions.startswith("You answer"), r.output_text)

# --- Streaming: every event in order, deltas adding up to the final text.
MESSAGE = ["response.output_item.added", "response.content_part.added", "response.output_text.delta",
           "response.output_text.done", "response.content_part.done", "response.output_item.done"]
CALL = ["response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done"]


def check_events(name, events, message, calls, last="response.completed"):
    """The event types, runs of text deltas squeezed to one, are the expected sequence."""
    types = [e.type for e in events]
    squeezed = [t for i, t in enumerate(types) if not (t == "response.output_text.delta" and i
                                                     and types[i - 1] == t)]
    want = ["response.created", "response.in_progress"] + (MESSAGE if message else []) + CALL * calls + [last]
    check(name + " event order", squeezed == want, types)
    seq = [e.sequence_number for e in events]
    check(name + " sequence numbers", seq == list(range(seq[0], seq[0] + len(seq))), seq)
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


with client.responses.stream(model=model, input=CAPITAL, temperature=0, max_output_tokens=16) as s:
    events = list(s)
    final = s.get_final_response()
deltas = check_events("stream()", events, True, 0)
check("stream() deltas == final text == create text", deltas == final.output_text == text_answer,
      (deltas, final.output_text, text_answer))
check("stream() final usage", final.usage.output_tokens > 0 and final.status == "completed", final.usage)
done = next(e for e in events if e.type == "response.output_text.done")
check("stream() text.done", done.text == deltas and done.item_id == final.output[0].id, done)

events = list(client.responses.create(model=model, input=CAPITAL, temperature=0, max_output_tokens=16, stream=True))
deltas = check_events("create(stream=True)", events, True, 0)
check("create(stream=True) deltas == final text", deltas == events[-1].response.output_text == text_answer,
      (deltas, events[-1].response.output_text))
check("create(stream=True) created is in progress", events[0].response.status == "in_progress"
      and events[0].response.id == events[-1].response.id, events[0])

events = list(client.responses.create(model=model, input="Write a long poem about the sea.", temperature=0,
                                      max_output_tokens=5, stream=True))
check_events("incomplete stream", events, True, 0, "response.incomplete")
check("incomplete stream reason", events[-1].response.incomplete_details.reason == "max_output_tokens", events[-1])

# --- A tool round trip: the call, its output sent back, the answer in text.
r = client.responses.create(model=model, input=ASK_WEATHER, tools=[WEATHER], temperature=0, max_output_tokens=64)
calls = [o for o in r.output if o.type == "function_call"]
check("function_call item", len(calls) == 1 and calls[0].name == "get_weather" and calls[0].call_id.startswith("call_")
      and calls[0].id.startswith("fc_") and calls[0].status == "completed", r.output)
call = calls[0]
args = json.loads(call.arguments)
check("function_call arguments name Paris", isinstance(args, dict)
      and any(isinstance(v, str) and "paris" in v.lower() for v in args.values()), args)
check("echoed tools", r.tools[0].name == "get_weather" and r.tools[0].type == "function", r.tools)

with client.responses.stream(model=model, input=ASK_WEATHER, tools=[WEATHER], temperature=0,
                             max_output_tokens=64) as s:
    events = list(s)
    final = s.get_final_response()
check_events("streamed call", events, any(o.type == "message" for o in r.output), 1)
scall = next(o for o in final.output if o.type == "function_call")
check("streamed call == non-streamed call", scall.name == call.name and json.loads(scall.arguments) == args,
      (scall, call))
arg_done = next(e for e in events if e.type == "response.function_call_arguments.done")
check("arguments.done", arg_done.arguments == scall.arguments and arg_done.item_id == scall.id, arg_done)

RESULT = json.dumps({"temperature": 18, "condition": "sunny"})
r2 = client.responses.create(model=model, previous_response_id=r.id, tools=[WEATHER], temperature=0,
                             max_output_tokens=40,
                             input=[{"type": "function_call_output", "call_id": call.call_id, "output": RESULT}])
check("tool output answered (previous_response_id)", "18" in r2.output_text
      and not any(o.type == "function_call" for o in r2.output), r2.output)
check("tool turn from the prefix cache", r2.usage.input_tokens_details.cached_tokens >= r.usage.input_tokens,
      (r2.usage, r.usage))
full = [{"role": "user", "content": ASK_WEATHER},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": RESULT}]
r3 = client.responses.create(model=model, input=full, tools=[WEATHER], temperature=0, max_output_tokens=40)
check("tool output answered (full input)", "18" in r3.output_text, r3.output)

r = client.responses.create(model=model, input="Tell me a joke.", tools=[WEATHER],
                            tool_choice={"type": "function", "name": "get_weather"}, temperature=0,
                            max_output_tokens=64)
check("named tool_choice forces the call", [o.type for o in r.output] == ["function_call"]
      and isinstance(json.loads(r.output[0].arguments).get("city"), str), r.output)
r = client.responses.create(model=model, input=ASK_WEATHER, tools=[WEATHER], tool_choice="none", temperature=0,
                            max_output_tokens=16)
check("tool_choice none", [o.type for o in r.output] == ["message"], r.output)


# --- Structured output: text.format json_schema and json_object, and responses.parse.
class Engineer(BaseModel):
    name: str
    age: int


p = client.responses.parse(model=model, input="Give the name and age of a fictional software engineer.",
                           text_format=Engineer, temperature=0, max_output_tokens=100)
check("parse(text_format=Engineer)", isinstance(p.output_parsed, Engineer) and p.output_parsed.name, p.output_text)
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"},
                                           "population": {"type": "integer"}},
          "required": ["city", "country", "population"], "additionalProperties": False}
r = client.responses.create(model=model, input="Give facts about Paris as JSON.", temperature=0, max_output_tokens=80,
                            text={"format": {"type": "json_schema", "name": "city", "schema": SCHEMA, "strict": True}})
obj = json.loads(r.output_text)
check("json_schema conforms", set(obj) == {"city", "country", "population"} and isinstance(obj["city"], str)
      and isinstance(obj["population"], int) and not isinstance(obj["population"], bool), obj)
check("json_schema echoed", r.text.format.type == "json_schema" and r.text.format.name == "city", r.text)
r = client.responses.create(model=model, input="What is the capital of France? Answer in JSON.", temperature=0,
                            max_output_tokens=60, text={"format": {"type": "json_object"}})
check("json_object", isinstance(json.loads(r.output_text), dict), r.output_text)

# --- previous_response_id: the model uses the earlier turn, served from the prefix cache.
r1 = client.responses.create(model=model, temperature=0, max_output_tokens=16,
                             input="My favourite colour is green. Just say OK.")
r2 = client.responses.create(model=model, temperature=0, max_output_tokens=16, previous_response_id=r1.id,
                             input="What is my favourite colour? Answer in one word.")
check("continued conversation remembers", "green" in r2.output_text.lower(), r2.output_text)
check("continued conversation from the prefix cache",
      r2.usage.input_tokens_details.cached_tokens >= r1.usage.input_tokens
      and r2.usage.input_tokens > r1.usage.input_tokens + r1.usage.output_tokens, (r1.usage, r2.usage))
check("previous_response_id echoed", r2.previous_response_id == r1.id, r2)
items = client.responses.input_items.list(r2.id)
roles = [(i.type, getattr(i, "role", None)) for i in items.data]
check("input_items newest first", roles == [("message", "user"), ("message", "assistant"), ("message", "user")]
      and items.data[1].id == r1.output[0].id, roles)
asc = client.responses.input_items.list(r2.id, order="asc", limit=1)
check("input_items asc page", len(asc.data) == 1 and asc.has_more and asc.data[0].id == items.data[2].id, asc)

# --- Stored responses: retrieve, delete; store=False is never stored.
got = client.responses.retrieve(r1.id)
check("retrieve", got.id == r1.id and got.output_text == r1.output_text and got.usage == r1.usage, got)
check("delete", client.responses.delete(r1.id) is None)
try:
    client.responses.retrieve(r1.id)
    raise AssertionError("a deleted response was retrieved")
except openai.NotFoundError as e:
    check("deleted is 404", e.status_code == 404, e)
check("a continuation outlives what it continued", client.responses.retrieve(r2.id).id == r2.id)
try:
    client.responses.delete(r1.id)
    raise AssertionError("a deleted response was deleted again")
except openai.NotFoundError as e:
    check("delete twice is 404", e.status_code == 404, e)

r = client.responses.create(model=model, input="Hi", store=False, temperature=0, max_output_tokens=4)
check("store=False echoed", r.to_dict()["store"] is False, r)
try:
    client.responses.retrieve(r.id)
    raise AssertionError("a store=False response was retrieved")
except openai.NotFoundError as e:
    check("store=False not retrievable", e.status_code == 404, e)
for prev in (r.id, "resp_unknown"):
    try:
        client.responses.create(model=model, input="Hi", previous_response_id=prev)
        raise AssertionError("an unknown previous_response_id was accepted")
    except openai.NotFoundError as e:
        check(f"previous_response_id {prev[:12]} 404", e.code == "previous_response_not_found", e)

# --- Bad input: 400 in OpenAI's shape.
BAD = [
    ("missing input", {}),
    ("input of the wrong type", {"input": 5}),
    ("temperature of the wrong type", {"input": "Hi", "temperature": "hot"}),
    ("an unknown role", {"input": [{"role": "robot", "content": "Hi"}]}),
    ("an image part", {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]}),
    ("a built-in tool", {"input": "Hi", "tools": [{"type": "web_search"}]}),
    ("a tool without a name", {"input": "Hi", "tools": [{"type": "function", "parameters": {}}]}),
    ("an unknown text.format", {"input": "Hi", "text": {"format": {"type": "yaml"}}}),
    ("an unsupported schema keyword", {"input": "Hi", "text": {"format": {
        "type": "json_schema", "name": "x", "schema": {"type": "array", "uniqueItems": True}}}}),
    ("a named tool_choice without tools", {"input": "Hi", "tool_choice": {"type": "function", "name": "f"}}),
    ("background", {"input": "Hi", "background": True}),
    ("max_output_tokens 0", {"input": "Hi", "max_output_tokens": 0}),
]
for name, body in BAD:
    try:
        client.responses.create(model=model, **body)
        raise AssertionError(f"{name} was accepted")
    except openai.BadRequestError as e:
        check(f"{name} 400", e.status_code == 400 and e.message, e)

print("ALL OK")
