#!/usr/bin/env python3
"""Greedy tokens of llama.cpp (llama-cpp-python on the bench/ build) and of `weft run` on one
GGUF file, for the prompts of a reference JSON (tests/reference/*.json), compared step by step
up to the first near-tie (top-1 minus top-2 logit below 0.3 in either engine).

Usage: PYTHONPATH=$LLAMACPP_PYTHONPATH greedy_compare.py WEFT_BINARY MODEL.gguf REFERENCE.json
Prints one JSON object: cases, steps compared, whether every case agreed, and the first
disagreement of each case that did not.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

STEPS = 24
NEAR_TIE = 0.3


def last_logits(llm):
    import llama_cpp
    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).astype(np.float32)


def llama_steps(llm, prompt, add_bos, special):
    toks = llm.tokenize(prompt.encode(), add_bos=add_bos, special=special)
    llm.reset()
    llm.eval(toks)
    out = []
    for _ in range(STEPS):
        logits = last_logits(llm)
        order = np.argsort(-logits)[:2]
        out.append((int(order[0]), float(logits[order[0]] - logits[order[1]])))
        llm.eval([int(order[0])])
    return toks, out


def weft_steps(weft, model, prompt, special):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(prompt)
    args = [weft, "run", "--model", model, "--prompt-file", f.name, "--raw", "--max-tokens",
            str(STEPS), "--temperature", "0", "--ignore-eos", "--json", "--logits", "2",
            "--threads", os.environ.get("THREADS", "2"), "--ctx", "1024"]
    if special:
        args.append("--special")
    r = subprocess.run(args, capture_output=True, text=True, check=True)
    os.unlink(f.name)
    v = json.loads(r.stdout)
    steps = [(s["top"][0][0], s["top"][0][1] - s["top"][1][1]) for s in v["steps"]]
    return v["prompt_ids"], steps


def main(weft, model, reference):
    from llama_cpp import Llama
    ref = json.load(open(reference))
    llm = Llama(model_path=model, n_ctx=1024, n_threads=int(os.environ.get("THREADS", "2")),
                verbose=False, logits_all=False)
    compared, agreed, problems = 0, True, []
    for i, case in enumerate(ref["cases"]):
        special = case["kind"] == "chat"
        ltoks, lsteps = llama_steps(llm, case["prompt"], case["add_bos"], special)
        wtoks, wsteps = weft_steps(weft, model, case["prompt"], special)
        if list(ltoks) != list(wtoks):
            agreed = False
            problems.append({"case": i, "prompt_ids_differ": True})
            continue
        for s, ((lt, lm), (wt, wm)) in enumerate(zip(lsteps, wsteps)):
            if lm < NEAR_TIE or wm < NEAR_TIE:
                break  # a near-tie: past it the two may legitimately differ
            if lt != wt:
                agreed = False
                problems.append({"case": i, "step": s, "llama": lt, "weft": wt,
                                 "llama_margin": lm, "weft_margin": wm})
                break
            compared += 1
    print(json.dumps({"cases": len(ref["cases"]), "steps_compared": compared,
                      "agree": agreed, "disagreements": problems}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
