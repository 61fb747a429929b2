"""Image encode time and first-token latency: `weft run --image` beside llama.cpp's
`llama-mtmd-cli`, on the same files, the same prompt and the same threads, runs alternated.

    eval "$(bench/build-llamacpp.sh)"
    cargo build --release -p weft-server --bin weft
    python3 bench/vision_mtmd.py $LLAMACPP_BIN target/release/weft models [family ...]

Families and their text models are those of scripts/vision/check_mtmd_cli.py (the tiny
random-weight projectors of tests/data/vision; Gemma 3's text model is the real Gemma 3 270M
Q4_K_M). Both tools render the same chat template around "<__media__>Describe this image.".

What is compared (milliseconds, median of the runs):
- encode: the vision tower and projector. mtmd: "mtmd batch encoding done in N ms" (its log
  with -v); weft: `timings.image_encode_ms` (preprocessing included in both).
- prompt: evaluating the prompt's text tokens and image rows in the text model. mtmd:
  llama_perf's "prompt eval time"; weft: `timings.prompt_ms`.
- first token: encode + prompt (+ weft's file decode, which mtmd does before its clock starts;
  it is under 2 ms here). Model loading is outside both.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "vision"))
from check_mtmd_cli import DATA, FAMILIES  # noqa: E402

RUNS = int(os.environ.get("RUNS", "3"))
IMAGES = os.environ.get("IMAGES", "square_224x224.png,landscape_640x480.jpg").split(",")
THREADS = os.environ.get("THREADS", "2")


def mtmd(bin_dir: Path, model: str, mmproj: Path, image: Path, template: str) -> dict:
    cmd = [str(bin_dir / "llama-mtmd-cli"), "-m", model, "--mmproj", str(mmproj),
           "--image", str(image), "-p", "<__media__>Describe this image.",
           "--chat-template", template, "--temp", "0", "-n", "1", "-t", THREADS,
           "-c", "8192", "-b", "2048", "-ub", "2048", "-v"]
    env = dict(os.environ, LD_LIBRARY_PATH=str(bin_dir))
    res = subprocess.run(cmd, capture_output=True, timeout=900, env=env)
    log = res.stderr.decode("utf-8", "replace")
    if res.returncode != 0:
        raise SystemExit(f"llama-mtmd-cli failed:\n{log[-2000:]}")
    enc = sum(float(m) for m in re.findall(r"mtmd batch encoding done in (\d+) ms", log))
    prompt = float(re.search(r"prompt eval time =\s*([\d.]+) ms", log).group(1))
    return {"encode": enc, "prompt": prompt, "first": enc + prompt}


def weft(exe: str, model: str, mmproj: Path, image: Path, prompt_file: Path) -> dict:
    cmd = [exe, "run", "--model", model, "--mmproj", str(mmproj), "--image", str(image),
           "--raw", "--special", "--prompt-file", str(prompt_file), "--temperature", "0",
           "--max-tokens", "1", "--threads", THREADS, "--ctx", "8192", "--json"]
    res = subprocess.run(cmd, capture_output=True, timeout=900)
    if res.returncode != 0:
        raise SystemExit(f"weft run failed:\n{res.stderr.decode()[-2000:]}")
    t = json.loads(res.stdout)["timings"]
    return {"encode": t["image_encode_ms"], "prompt": t["prompt_ms"], "first": t["first_token_ms"]}


def main() -> None:
    bin_dir, exe, models = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    families = sys.argv[4:] or list(FAMILIES)
    rows = []
    for fam in families:
        model_t, template = FAMILIES[fam]
        model = model_t.format(models=models, data=DATA)
        mmproj = next((DATA / fam).glob("mmproj-*.gguf"))
        # The rendered prompt (what mtmd's template gives), fed to weft as raw text.
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write((DATA / fam / "prompt.txt").read_text())
            prompt_file = Path(f.name)
        for name in IMAGES:
            image = DATA / "images" / name
            got = {"mtmd": [], "weft": []}
            for _ in range(RUNS):
                got["mtmd"].append(mtmd(bin_dir, model, mmproj, image, template))
                got["weft"].append(weft(exe, model, mmproj, image, prompt_file))
            med = {tool: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                   for tool, runs in got.items()}
            rows.append((fam, name, med))
            print(f"{fam} {name}: " + ", ".join(
                f"{k} mtmd {med['mtmd'][k]:.0f} / weft {med['weft'][k]:.0f} ms "
                f"({med['mtmd'][k] / max(med['weft'][k], 1e-9):.2f}x)"
                for k in ("encode", "prompt", "first")), flush=True)
    print("\n| family | image | encode mtmd / weft (ms) | × | prompt mtmd / weft (ms) | × |"
          " first token mtmd / weft (ms) | × |")
    print("|---|---|---|---|---|---|---|---|")
    for fam, name, m in rows:
        cells = []
        for k in ("encode", "prompt", "first"):
            a, b = m["mtmd"][k], m["weft"][k]
            cells += [f"{a:.0f} / {b:.0f}", f"{a / max(b, 1e-9):.2f}"]
        print(f"| {fam} | {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
