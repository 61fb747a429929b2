"""Cross-checks the greedy runs in tests/data/vision/*/index.json against llama-mtmd-cli.

usage: python check_mtmd_cli.py LLAMACPP_BIN MODELS_DIR [FAMILY ...]

mtmd_ref (the dumper that made the references) drives libmtmd directly; this runs llama.cpp's
own CLI on the same files with a chat template that renders the same prompt, greedy
(--temp 0), 32 tokens, and compares its printed text with the reference token ids decoded
through the text GGUF's vocabulary. The CLI prints no ids, so text is what can be compared.
Prints one line per image and exits non-zero on any difference.
"""
import json
import subprocess
import sys
from pathlib import Path

from gguf import GGUFReader

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "vision"

# (text model, chat template rendering prompt.txt for the message "<__media__>Describe this image.")
FAMILIES = {
    "gemma3": ("{models}/gemma-3-270m-q4_k_m.gguf",
               "{{ bos_token }}{% for message in messages %}<start_of_turn>{{ message['role'] }}\n"
               "{{ message['content'] }}<end_of_turn>\n{% endfor %}"
               "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"),
    "qwen25vl": ("{data}/qwen25vl/qwen25vl-tiny-q8_0.gguf",
                 "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
                 "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"),
    "idefics3": ("{data}/idefics3/idefics3-tiny-q8_0.gguf",
                 "<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}:"
                 "{{ message['content'] }}<end_of_utterance>\n{% endfor %}"
                 "{% if add_generation_prompt %}Assistant:{% endif %}"),
}


def byte_decoder() -> dict[str, int]:
    """GPT-2's byte <-> printable character table (byte-level BPE vocabularies)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def detokenize(gguf_path: str, ids: list[int]) -> str:
    r = GGUFReader(gguf_path)
    toks = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    # the CLI prints control and unused tokens (e.g. a random model's "[PAD49194]") as nothing
    ids = [i for i in ids if types[i] not in (3, 5)]
    if r.fields["tokenizer.ggml.model"].contents() == "gpt2":
        dec = byte_decoder()
        return bytes(dec[ch] for i in ids for ch in toks[i]).decode("utf-8", "replace")
    out = bytearray()
    for i in ids:
        t = toks[i]
        if t.startswith("<0x") and t.endswith(">") and len(t) == 6:
            out.append(int(t[3:5], 16))
        else:
            out += t.replace("\u2581", " ").encode()
    return out.decode("utf-8", "replace")


def main() -> None:
    bin_dir, models = Path(sys.argv[1]), sys.argv[2]
    families = sys.argv[3:] or list(FAMILIES)
    bad = 0
    for fam in families:
        model_t, template = FAMILIES[fam]
        model = model_t.format(models=models, data=DATA)
        mmproj = next((DATA / fam).glob("mmproj-*.gguf"))
        ix = json.loads((DATA / fam / "index.json").read_text())
        for e in ix["images"]:
            cmd = [str(bin_dir / "llama-mtmd-cli"), "-m", model, "--mmproj", str(mmproj),
                   "--image", str(DATA / "images" / e["image"]), "-p", "<__media__>Describe this image.",
                   "--chat-template", template, "--temp", "0", "-n", str(len(e["greedy"])), "--ignore-eos",
                   "-t", "2", "-c", "8192", "-b", "2048", "-ub", "2048"]
            res = subprocess.run(cmd, capture_output=True, timeout=600)
            cli = res.stdout.decode("utf-8", "replace").strip()
            want = detokenize(model, e["greedy"]).strip()
            ok = res.returncode == 0 and cli == want
            bad += not ok
            print(f"{fam} {e['image']}: {'same text' if ok else 'DIFFERENT'}"
                  f" (min margin {min(e['greedy_margin']):.4f})", flush=True)
            if not ok:
                print("  reference:", repr(want[:200]), "\n  cli:      ", repr(cli[:200]))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
