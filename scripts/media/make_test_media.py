#!/usr/bin/env python3
"""Makes the small media files in tests/data/media/ that media/tests/ read.

Needs PyPI `av` (its wheel bundles FFmpeg with libx264, libx265, libvpx), `img2pdf` and `pillow`:
    python3 -m venv ~/.cache/weft/media-venv
    ~/.cache/weft/media-venv/bin/pip install av img2pdf pillow
    ~/.cache/weft/media-venv/bin/python scripts/media/make_test_media.py

Every video frame is one solid colour chosen by its frame index (`colour(i)` below; the Rust tests
compute the same formula), so a test can tell which source frame a sampled frame is and check its
timestamp. The PDF pages are scanned-style: one embedded PNG each, no text layer.
"""
import io
import os
import sys

import av
import img2pdf
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "media")


def colour(i):
    """Frame i's colour; neighbouring frames differ by at least 40 in some channel."""
    return (28 + (60 + 97 * i) % 200, 28 + (20 + 151 * i) % 200, 28 + (140 + 59 * i) % 200)


def solid(i, width, height):
    return Image.new("RGB", (width, height), colour(i))


def moving(i, width, height):
    """Frame i of the moving test: rows 0-15 solid colour(i) (which frame it is), below them a
    ramp that moves 16 levels a frame in red and 7 in green over a checkerboard in blue that
    flips every 10 frames (motion, texture and sharp edges for the coder's tools)."""
    img = Image.new("RGB", (width, height))
    px = img.load()
    for y in range(height):
        for x in range(width):
            if y < 16:
                px[x, y] = colour(i)
            else:
                px[x, y] = moving_pixel(i, x, y)
    return img


def moving_pixel(i, x, y):
    return ((x + 16 * i) % 256, (3 * y + 7 * i) % 256, ((x // 16 + y // 16 + i // 10) % 2) * 200 + 20)


def write_video(name, container_format, codec, width, height, fps, frames, options, pix_fmt="yuv420p",
                draw=solid):
    path = os.path.join(OUT, name)
    with av.open(path, "w", format=container_format) as out:
        stream = out.add_stream(codec, rate=fps)
        stream.width = width
        stream.height = height
        stream.pix_fmt = pix_fmt
        stream.options = options
        for i in range(frames):
            img = draw(i, width, height)
            frame = av.VideoFrame.from_image(img).reformat(format=pix_fmt)
            frame.pts = i
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    print(f"{name}: {os.path.getsize(path)} bytes")


def page_png(width, height, blocks):
    """A white page with solid rectangles [(x0, y0, x1, y1, rgb)]."""
    img = Image.new("RGB", (width, height), (255, 255, 255))
    for x0, y0, x1, y1, rgb in blocks:
        img.paste(rgb, (x0, y0, x1, y1))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def write_pdf():
    # 3 pages of 170x220 px at 20 dpi (8.5 x 11 in, US Letter), each with its own layout so page
    # order can be checked: top half / bottom half / left half colours.
    w, h = 170, 220
    pages = [
        page_png(w, h, [(0, 0, w, h // 2, (200, 30, 30)), (0, h // 2, w, h, (30, 30, 200))]),
        page_png(w, h, [(0, 0, w // 2, h, (30, 160, 30))]),
        page_png(w, h, [(w // 4, h // 4, 3 * w // 4, 3 * h // 4, (20, 20, 20))]),
    ]
    layout = img2pdf.get_fixed_dpi_layout_fun((20, 20))
    path = os.path.join(OUT, "scan3.pdf")
    with open(path, "wb") as f:
        f.write(img2pdf.convert(pages, layout_fun=layout))
    print(f"scan3.pdf: {os.path.getsize(path)} bytes")


def main():
    os.makedirs(OUT, exist_ok=True)
    # Each neighbouring pair of frames must be told apart after lossy coding.
    for i in range(64):
        a, b = colour(i), colour(i + 1)
        assert max(abs(x - y) for x, y in zip(a, b)) >= 40, (i, a, b)
    # H.264 Constrained Baseline (no B-frames), 4 s at 8 fps, a key frame every second.
    write_video("h264_baseline.mp4", "mp4", "libx264", 64, 48, 8, 32,
                {"profile": "baseline", "g": "8", "keyint_min": "8", "sc_threshold": "0", "crf": "10"})
    # H.264 High with B-frames (composition offsets, decode order != display order), 3 s at 10 fps.
    write_video("h264_bframes.mp4", "mp4", "libx264", 48, 32, 10, 30,
                {"profile": "high", "bf": "2", "g": "10", "keyint_min": "10", "sc_threshold": "0",
                 "crf": "10", "b_strategy": "0"})
    # H.264 High as x264's default preset makes it (CABAC, 8x8 transform, weighted prediction,
    # B-pyramid, one key frame), with motion: 2 s at 30 fps.
    write_video("h264_high_moving.mp4", "mp4", "libx264", 128, 72, 30, 60,
                {"preset": "medium", "crf": "20"}, draw=moving)
    # Codecs the crate does not decode, each must be refused by name.
    write_video("mpeg4_part2.mp4", "mp4", "mpeg4", 32, 32, 4, 4, {"qscale": "4"})
    write_video("hevc.mp4", "mp4", "libx265", 64, 64, 4, 4,
                {"x265-params": "log-level=error"})
    # H.264 that OpenH264 does not decode: 4:4:4 chroma (High 4:4:4 Predictive) and 10-bit.
    write_video("h264_444.mp4", "mp4", "libx264", 32, 32, 4, 2, {"crf": "30"}, pix_fmt="yuv444p")
    write_video("h264_10bit.mp4", "mp4", "libx264", 32, 32, 4, 2, {"crf": "30"}, pix_fmt="yuv420p10le")
    write_video("vp9.webm", "webm", "libvpx-vp9", 32, 32, 4, 4, {"crf": "30", "b": "0"})
    write_pdf()


if __name__ == "__main__":
    sys.exit(main())
