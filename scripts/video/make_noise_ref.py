"""Writes tests/data/video/ref/noise/: torch.randn(n) from torch.Generator().manual_seed(seed) on
the CPU, f32 little-endian, for the (seed, n) cases core/tests/diffusion_noise.rs checks
weft_core::diffusion::noise::gaussian_noise against: a multiple of 16, a count with a tail
(17, 100: the last 16 values redrawn), a seed above 32 bits (truncated), the smallest count
of the vectorised path (16). The pipeline runs' own noise (ref/*/noise.f32, seed 1234) is a
fifth case. Run with the packages of scripts/video/requirements.txt."""
import pathlib

import torch

CASES = [(7, 17), (2**40 + 5, 100), (0, 16), (99, 4096)]
out = pathlib.Path(__file__).resolve().parents[2] / "tests/data/video/ref/noise"
out.mkdir(parents=True, exist_ok=True)
for seed, n in CASES:
    values = torch.randn(n, generator=torch.Generator().manual_seed(seed))
    values.numpy().astype("<f4").tofile(out / f"seed{seed}_n{n}.f32")
print(f"torch {torch.__version__}: wrote {len(CASES)} files to {out}")
