"""Writes small seed GGUF files for the fuzz corpus: headers of the real models with their
tensor data dropped, and tiny synthetic files. Run from the repo root after fetching models."""
import pathlib, struct, sys

out = pathlib.Path("fuzz/corpus/gguf_header")
out.mkdir(parents=True, exist_ok=True)

def s(x: bytes) -> bytes:
    return struct.pack("<Q", len(x)) + x

def kv(key, tag, payload):
    return s(key.encode()) + struct.pack("<I", tag) + payload

tiny = b"GGUF" + struct.pack("<IQQ", 3, 1, 3)
tiny += kv("general.architecture", 8, s(b"llama"))
tiny += kv("a.nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 2) + struct.pack("<II", 1, 2))
tiny += kv("general.alignment", 4, struct.pack("<I", 32))
tiny += s(b"w") + struct.pack("<I", 2) + struct.pack("<QQ", 32, 1) + struct.pack("<I", 8) + struct.pack("<Q", 0)
tiny += b"\0" * ((32 - len(tiny) % 32) % 32) + b"\1" * 34
(out / "tiny").write_bytes(tiny)

# Real headers, small enough for a corpus: keep only files whose header is < 64 KiB is impossible
# (vocabularies are megabytes), so keep the first 4 KiB of each model — the parser sees a truncation.
for p in pathlib.Path("models").glob("*.gguf"):
    (out / ("head-" + p.stem[:20])).write_bytes(p.read_bytes()[:4096])
print("seeds in", out, file=sys.stderr)
