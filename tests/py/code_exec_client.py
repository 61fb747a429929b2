"""Server-side code execution (`weft serve --code-exec`) through the official `openai` client:
the server runs the model's `run_python` calls itself and answers with the final text, listing
the executed calls in the extension field `executed_calls`; files a run writes download from
`/api/code/artifacts/...` byte for byte.

Usage: code_exec_client.py BASE_URL MODEL_NAME
Greedy throughout (temperature 0), with a system prompt that tells the 0.5B model how to use
the tool, so its choices are deterministic. Every check asserts and prints one line.
"""
import json
import sys
import urllib.request

import openai

from common import check, openai_client

base, model = sys.argv[1], sys.argv[2]
client = openai_client(base, 1800)

SYSTEM = ("You are a helpful assistant. Compute with the run_python tool: write a complete "
          "program that prints the result, then answer with the printed value.")


def example(question, code, stdout, answer):
    """One worked exchange (a call, its result, the answer): a 0.5B model follows an example
    far more reliably than instructions."""
    result = {"exit_code": 0, "stdout": stdout, "stderr": "", "error": None,
              "files_created": [], "files_modified": []}
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_ex1", "type": "function",
             "function": {"name": "run_python", "arguments": json.dumps({"code": code})}}]},
        {"role": "tool", "tool_call_id": "call_ex1", "content": json.dumps(result)},
        {"role": "assistant", "content": answer},
    ]


EXAMPLE = example("Use Python to compute the sum of the squares of 1 to 10.",
                  "total = 0\nfor n in range(1, 11):\n    total += n * n\nprint(total)", "385\n",
                  "The sum of the squares of 1 to 10 is 385.")


def ask(content):
    return [{"role": "system", "content": SYSTEM}] + EXAMPLE + [{"role": "user", "content": content}]


# --- Non-streaming: the server runs the call and answers with its result.
r = client.chat.completions.create(
    model=model, messages=ask("Use Python to compute the 20th Fibonacci number."),
    temperature=0, max_tokens=120)
msg = r.choices[0].message
executed = (msg.model_extra or {}).get("executed_calls") or []
print("fib answer:", repr(msg.content), "executed:", json.dumps(executed)[:600])
check("fib: no tool call left for the client", msg.tool_calls is None, msg)
check("fib: a run_python call was executed",
      any(c["name"] == "run_python" for c in executed), executed)
py = next(c for c in executed if c["name"] == "run_python")
check("fib: the call succeeded and printed 6765", py["ok"] and "6765" in py["output"], py)
check("fib: executed call shape",
      isinstance(py["arguments"], dict) and "code" in py["arguments"] and py["round"] >= 1
      and py["id"] and isinstance(py["files"], list), py)
check("fib: the answer has 6765", "6765" in (msg.content or ""), msg.content)
check("fib: finish_reason stop", r.choices[0].finish_reason == "stop", r.choices[0])
check("fib: usage adds up the rounds", r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
      and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, r.usage)

# --- Streaming: a run writes a CSV file; its artifact URL downloads byte for byte. The worked
# example writes a file the same way, so the model writes plain `\n`-separated lines.
FILE_EXAMPLE = example(
    "Use Python to write the numbers 1 to 3 and their doubles to doubles.csv with the header n,double.",
    "rows = ['n,double']\nfor n in range(1, 4):\n    rows.append(f'{n},{2 * n}')\n"
    "open('doubles.csv', 'w').write('\\n'.join(rows) + '\\n')\nprint('wrote doubles.csv')",
    "wrote doubles.csv\n", "I wrote doubles.csv.")
EXPECTED = ("\n".join(["n,square"] + [f"{n},{n * n}" for n in range(1, 6)]) + "\n").encode()
CSV_ASK = ([{"role": "system", "content": SYSTEM}] + FILE_EXAMPLE + [{"role": "user", "content":
           "Use Python to write the numbers 1 to 5 and their squares to squares.csv with the header n,square."}])
content, finish, executed = "", None, None
for chunk in client.chat.completions.create(
        model=model, temperature=0, max_tokens=200, stream=True,
        messages=CSV_ASK):
    if not chunk.choices:
        continue
    c = chunk.choices[0]
    content += c.delta.content or ""
    extra = c.delta.model_extra or {}
    if extra.get("executed_calls"):
        executed = extra["executed_calls"]
    finish = c.finish_reason or finish
print("csv answer:", repr(content), "executed:", json.dumps(executed)[:600])
check("csv: stream finished", finish in ("stop", "length"), finish)
check("csv: the last chunk lists the executed calls", executed, executed)
files = [f for c in executed for f in c["files"] if f["name"] == "squares.csv"]
check("csv: squares.csv is listed with its size", files and files[0]["bytes"] == len(EXPECTED), executed)
url = files[0]["url"]
check("csv: the url is under /api/code/artifacts/", url.startswith("/api/code/artifacts/"), url)
with urllib.request.urlopen(base + url) as resp:
    body = resp.read()
    disposition = resp.headers.get("Content-Disposition", "")
    nosniff = resp.headers.get("X-Content-Type-Options", "")
check("csv: the download is byte-identical to what the code wrote", body == EXPECTED, body)
check("csv: served as an attachment, nosniff",
      "attachment" in disposition and "squares.csv" in disposition and nosniff == "nosniff",
      (disposition, nosniff))

# --- Naming a skill the server does not have: 400 in OpenAI's error shape.
try:
    client.chat.completions.create(model=model, messages=ask("hi"), max_tokens=4,
                                   extra_body={"skills": ["no-such-skill"]})
    check("unknown skill is a 400", False)
except openai.BadRequestError as e:
    check("unknown skill is a 400", e.status_code == 400 and "no-such-skill" in str(e), e)

print("ALL OK")
