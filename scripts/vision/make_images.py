"""Writes the five deterministic test images of the vision references.

Sizes and aspect ratios differ on purpose (landscape, tall, very wide, square at the encoder's
own scale, tiny and odd-sized) so resize, pad and tiling paths are all exercised. Content is a
smooth colour field plus hard edges and a checker block, computed from the pixel coordinates
only (no randomness), so the files are identical on every run and every machine. PNG and JPEG
both appear: JPEG decoders differ by a few levels, which is why the references also carry the
decoded RGB bytes that llama.cpp saw.
"""
import sys
from pathlib import Path

import numpy as np
from PIL import Image

# name, width, height, format
IMAGES = [
    ("landscape_640x480.jpg", 640, 480, "JPEG"),
    ("tall_300x900.png", 300, 900, "PNG"),
    ("wide_1024x256.jpg", 1024, 256, "JPEG"),
    ("square_224x224.png", 224, 224, "PNG"),
    ("tiny_37x61.png", 37, 61, "PNG"),
]


def pixels(w: int, h: int) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    u, v = x / max(w - 1, 1), y / max(h - 1, 1)
    r = 255 * (0.5 + 0.5 * np.sin(6.0 * u + 1.0))
    g = 255 * v
    b = 255 * (0.5 + 0.5 * np.cos(9.0 * u * v))
    img = np.stack([r, g, b], axis=-1)
    # a hard-edged dark disc and a checker block give the resize filters edges to ring on
    disc = (u - 0.35) ** 2 + (v - 0.55) ** 2 < 0.04
    img[disc] = [20, 30, 200]
    cell = max(2, min(w, h) // 16)
    checker = ((x // cell + y // cell) % 2 == 0) & (u > 0.6) & (v < 0.4)
    img[checker] = [250, 250, 250]
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, w, h, fmt in IMAGES:
        im = Image.fromarray(pixels(w, h), "RGB")
        if fmt == "JPEG":
            # baseline, 4:2:0, fixed quality: the common case a client sends
            im.save(out / name, "JPEG", quality=85, subsampling=2, optimize=False)
        else:
            im.save(out / name, "PNG", optimize=False, compress_level=9)
        print(out / name, (out / name).stat().st_size)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
