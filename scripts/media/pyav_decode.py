#!/usr/bin/env python3
"""Decodes an MP4 with PyAV (PyPI `av`, FFmpeg's decoder) for media/tests/encode.rs: an oracle
for the files `weft_media::video::encode_mp4` writes that shares no code with the crate.

    python3 scripts/media/pyav_decode.py VIDEO.mp4 FRAMES.rgb

Writes every decoded frame, converted to RGB by FFmpeg (swscale, with the colour matrix and
range the stream declares), to FRAMES.rgb (raw rgb24, frames back to back) and prints one
`name value...` line per fact: the stream's codec, profile, pixel format, size, colour signalling,
frame rate, and each frame's presentation time in seconds and key-frame flag (1 or 0).
"""
import sys

import av


def main():
    path, raw_out = sys.argv[1], sys.argv[2]
    with av.open(path) as container:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        info = {
            "codec": ctx.name,
            "profile": ctx.profile,
            "pix_fmt": ctx.pix_fmt,
            "width": ctx.width,
            "height": ctx.height,
            "frames_declared": stream.frames,
            "rate": [stream.average_rate.numerator, stream.average_rate.denominator],
            "times": [],
            "key_frames": [],
        }
        with open(raw_out, "wb") as raw:
            for frame in container.decode(stream):
                if not info["times"]:
                    info["colorspace"] = int(frame.colorspace)
                    info["color_range"] = int(frame.color_range)
                info["times"].append(float(frame.time))
                info["key_frames"].append(bool(frame.key_frame))
                raw.write(frame.to_ndarray(format="rgb24").tobytes())
    for name, value in info.items():
        if isinstance(value, list):
            value = " ".join(str(int(v) if isinstance(v, bool) else v) for v in value)
        print(f"{name} {value}")


if __name__ == "__main__":
    main()
