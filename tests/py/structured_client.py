"""Structured output with constrained JSON Schema keywords against `weft serve`: the official
`openai` client's `chat.completions.parse` with pydantic models, and the `ollama` client's
`format`.

Usage: structured_client.py BASE_URL MODEL_NAME
Each model uses pydantic constraints that become JSON Schema keywords (`ge`/`le` → minimum /
maximum, `gt`/`lt` → exclusive bounds, `min_length`/`max_length`, `pattern`, `EmailStr`,
`datetime`, `date`, `UUID`, `IPv4Address` → `format`, `conlist` → minItems / maxItems,
`multiple_of`, `Optional`, nested and recursive models). `parse` validates the reply with
pydantic (it raises otherwise); the raw text is checked against each constraint again here.
Unsupported keywords must be 400s in OpenAI's error shape naming the keyword. Greedy
throughout. Every check asserts and prints one line.
"""
import ipaddress
import json
import re
import sys
import uuid
from datetime import date, datetime
from typing import List, Optional

import ollama
import openai
from pydantic import BaseModel, EmailStr, Field, conint, conlist

from common import check, openai_client

base, model = sys.argv[1], sys.argv[2]
client = openai_client(base, 900)


class Person(BaseModel):
    age: int = Field(ge=0, le=120)
    score: float = Field(gt=0.0, lt=1.0)
    name: str = Field(min_length=2, max_length=20)
    code: str = Field(pattern=r"^[A-Z]{3}-\d{4}$")


class Contact(BaseModel):
    email: EmailStr
    born: date
    last_seen: datetime
    id: uuid.UUID
    ip: ipaddress.IPv4Address


class Address(BaseModel):
    street: str = Field(max_length=30)
    zip: str = Field(pattern=r"^\d{5}$")


class Order(BaseModel):
    items: conlist(str, min_length=1, max_length=3)
    discount: Optional[int]
    quantity: conint(multiple_of=5, ge=5, le=50)
    address: Address


class Node(BaseModel):
    name: str = Field(max_length=12)
    children: List["Node"] = Field(max_length=2)


def ask(prompt, schema_model):
    """`parse` at temperature 0; returns (parsed object, raw JSON value)."""
    completion = client.chat.completions.parse(
        model=model,
        messages=[{"role": "user", "content": prompt}],
        response_format=schema_model,
        temperature=0,
        max_tokens=400,
    )
    msg = completion.choices[0].message
    print(f"   {schema_model.__name__}: {msg.content}")
    assert msg.parsed is not None, msg
    return msg.parsed, json.loads(msg.content)


p, raw = ask("Invent a person: age, a score between 0 and 1, a name and a code like ABC-1234.", Person)
check("person is a Person", isinstance(p, Person))
check("age within [0, 120]", isinstance(raw["age"], int) and 0 <= raw["age"] <= 120, raw)
check("score within (0, 1)", 0 < raw["score"] < 1, raw)
check("name has 2..20 characters", 2 <= len(raw["name"]) <= 20, raw)
check("code matches the pattern", re.fullmatch(r"[A-Z]{3}-\d{4}", raw["code"]) is not None, raw)

c, raw = ask("Invent a contact: an email address, a birth date, when they were last seen, an id and an IP address.", Contact)
check("contact is a Contact", isinstance(c, Contact))
check("email has a local part and a domain", re.fullmatch(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}", raw["email"]) is not None, raw)
check("born is a date", date.fromisoformat(raw["born"]) == c.born, raw)
check("last_seen is a date-time with an offset",
      re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", raw["last_seen"]) is not None, raw)
check("id is a UUID", str(uuid.UUID(raw["id"])) == raw["id"].lower(), raw)
check("ip is an IPv4 address", str(ipaddress.IPv4Address(raw["ip"])) == raw["ip"], raw)

o, raw = ask("Make an order: up to three items, an optional discount, a quantity (a multiple of 5) and a delivery address with a 5-digit zip.", Order)
check("order is an Order", isinstance(o, Order))
check("1..3 items", 1 <= len(raw["items"]) <= 3, raw)
check("discount is an integer or null", raw["discount"] is None or isinstance(raw["discount"], int), raw)
check("quantity is a multiple of 5 in [5, 50]", raw["quantity"] % 5 == 0 and 5 <= raw["quantity"] <= 50, raw)
check("nested address with a 5-digit zip", re.fullmatch(r"\d{5}", raw["address"]["zip"]) is not None, raw)
check("street within 30 characters", len(raw["address"]["street"]) <= 30, raw)

t, raw = ask("Describe a small family tree: a root person with children, each with their own children.", Node)


def tree_ok(n):
    return len(n["name"]) <= 12 and len(n["children"]) <= 2 and all(tree_ok(k) for k in n["children"])


check("recursive tree parses into Nodes", isinstance(t, Node))
check("every node within its bounds", tree_ok(raw), raw)

# The Ollama client with the schema pydantic produces.
reply = ollama.Client(host=base).chat(
    model=model,
    messages=[{"role": "user", "content": "Invent a person: age, a score, a name and a code."}],
    format=Person.model_json_schema(),
    options={"temperature": 0, "num_predict": 300},
)
op = Person.model_validate_json(reply.message.content)
check("ollama format=Person schema validates", 0 <= op.age <= 120 and 0 < op.score < 1, reply.message.content)

# Unsupported keywords: 400 in OpenAI's error shape, naming the keyword.
for schema, word in [
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "uniqueItems"),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": r"(a)\1"}}}, "backreference"),
    ({"type": "object", "properties": {"s": {"type": "string", "format": "iri"}}}, "iri"),
]:
    try:
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "hi"}],
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
            max_tokens=8,
        )
        raise AssertionError(f"{word}: no error")
    except openai.BadRequestError as e:
        body = e.response.json()
        msg = body["error"]["message"]
        check(f"400 names {word}", e.status_code == 400 and word in msg and body["error"]["type"], msg)

print("ALL OK")
