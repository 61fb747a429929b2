#!/usr/bin/env python3
"""Render chat cases with Python's Jinja2 the way Hugging Face transformers' apply_chat_template
does, to give Weft's Rust renderer byte-exact expectations.

Usage: render_chat.py MODEL.gguf CASES.json [--template FILE]

CASES.json is a list of {"messages": [...], "tools": [...] | null, "add_generation_prompt": bool,
"extra": {...} | null}. The template is the GGUF's `tokenizer.chat_template` (metadata read
with the `gguf` package's type table) unless --template names a file. Prints a JSON list with, per case,
{"ok": "<rendered>"} or {"error": "<message>"}.

The environment mirrors transformers' chat-template compiler: ImmutableSandboxedEnvironment
with trim_blocks, lstrip_blocks and the loopcontrols extension; a `tojson` filter equal to
json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys);
globals raise_exception and strftime_now; variables messages, tools, add_generation_prompt,
bos_token, eos_token, then the case's extra variables.
"""

import json
import struct
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


def read_gguf(path):
    """(chat_template, bos_token, eos_token) from a GGUF file's metadata.

    Reads only the key/value section, with value-type numbers from the `gguf` package:
    `gguf.GGUFReader` maps every tensor and token too, which takes half a minute per file on a
    busy machine.
    """
    from gguf import GGUFValueType as T

    scalar = {
        T.UINT8: "<B", T.INT8: "<b", T.UINT16: "<H", T.INT16: "<h", T.UINT32: "<I",
        T.INT32: "<i", T.FLOAT32: "<f", T.BOOL: "<?", T.UINT64: "<Q", T.INT64: "<q",
        T.FLOAT64: "<d",
    }
    with open(path, "rb") as f:
        data = f.read(64 << 20)  # metadata sits at the start; 64 MiB covers large vocabularies
    if data[:4] != b"GGUF":
        sys.exit(f"{path} is not a GGUF file")
    pos = 8
    _n_tensors, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16

    def string():
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        s = data[pos + 8 : pos + 8 + n].decode("utf-8")
        pos += 8 + n
        return s

    def value(ty, keep=True):
        nonlocal pos
        ty = T(ty)
        if ty == T.STRING:
            return string()
        if ty == T.ARRAY:
            ety, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            if T(ety) in scalar and not keep:
                pos += n * struct.calcsize(scalar[T(ety)])
                return None
            return [value(ety, keep) for _ in range(n)]
        (v,) = struct.unpack_from(scalar[ty], data, pos)
        pos += struct.calcsize(scalar[ty])
        return v

    wanted = {
        "tokenizer.chat_template", "tokenizer.ggml.tokens",
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
    }
    meta = {}
    for _ in range(n_kv):
        key = string()
        (ty,) = struct.unpack_from("<I", data, pos)
        pos += 4
        v = value(ty, keep=key in wanted)
        if key in wanted:
            meta[key] = v
    tokens = meta.get("tokenizer.ggml.tokens") or []

    def token(kind):
        tid = meta.get(f"tokenizer.ggml.{kind}_token_id")
        return tokens[tid] if tid is not None and tid < len(tokens) else ""

    return meta.get("tokenizer.chat_template"), token("bos"), token("eos")


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def raise_exception(message):
    raise TemplateError(message)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def main():
    args = sys.argv[1:]
    template_file = None
    if "--template" in args:
        i = args.index("--template")
        template_file = args[i + 1]
        del args[i : i + 2]
    model, cases_path = args
    source, bos, eos = read_gguf(model)
    if template_file is not None:
        with open(template_file, encoding="utf-8") as f:
            source = f.read()
    if source is None:
        sys.exit(f"{model} has no tokenizer.chat_template; pass --template")

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    template = env.from_string(source)

    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    out = []
    for case in cases:
        ctx = {"bos_token": bos, "eos_token": eos}
        ctx.update(case.get("extra") or {})
        ctx["messages"] = case["messages"]
        ctx["tools"] = case.get("tools")
        ctx["add_generation_prompt"] = case.get("add_generation_prompt", False)
        try:
            out.append({"ok": template.render(**ctx)})
        except Exception as e:  # noqa: BLE001 - every failure is a result to compare
            out.append({"error": f"{type(e).__name__}: {e}"})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
