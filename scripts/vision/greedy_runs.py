"""Greedy runs of mtmd_ref (its JSON lines on the command line) as one JSON document:
per image its greedy ids, margins (top-1 minus top-2 logit) and top-1 logits."""
import json
import sys

runs = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
doc = {
    "note": "llama.cpp mtmd greedy runs with the text model's flash attention off "
    "(MTMD_REF_TEXT_FLASH_ATTN=off); index.json's greedy runs have it on (auto)",
    "images": [
        {
            "image": r["image"],
            "greedy": r["greedy"],
            "greedy_margin": r["margin"],
            "greedy_top1_logit": r["top1_logit"],
        }
        for r in runs
    ],
}
json.dump(doc, sys.stdout, indent=1)
print()
