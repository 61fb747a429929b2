"""Scheduler-only references: diffusers' flow schedulers stepped on seeded random model outputs.

The pipeline runs (make_tiny_wan.py) cover Wan's defaults at 4 steps; these cover the settings
around them (solver order 1-3, bh1, no lower-order final steps, a sigma_min final sigma, a
disabled corrector step, other shifts and step counts) on a small [1, 4, 8] sample, so a port
is checked on every branch it implements. Values are stored as JSON numbers: each is a float32
printed exactly (Python's shortest repr of the float64 it widens to).
"""

import json

import torch
from diffusers import FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler

SHAPE = (1, 4, 8)

UNIPC_CASES = [
    dict(num_inference_steps=4, flow_shift=3.0),
    dict(num_inference_steps=10, flow_shift=3.0),
    # bh1 only with a sigma_min end: with a zero final sigma diffusers returns NaN there (inf * 0).
    dict(num_inference_steps=6, flow_shift=5.0, solver_type="bh1", final_sigmas_type="sigma_min"),
    dict(num_inference_steps=8, flow_shift=3.0, solver_order=3),
    dict(num_inference_steps=5, flow_shift=2.0, solver_order=1),
    dict(num_inference_steps=6, flow_shift=3.0, lower_order_final=False, final_sigmas_type="sigma_min"),
    dict(num_inference_steps=6, flow_shift=7.0, disable_corrector=[0, 3]),
    dict(num_inference_steps=20, flow_shift=1.0),
    dict(num_inference_steps=1, flow_shift=3.0),
]
EULER_CASES = [
    dict(num_inference_steps=4, shift=3.0),
    dict(num_inference_steps=10, shift=5.0),
    dict(num_inference_steps=7, shift=1.0),
    dict(num_inference_steps=1, shift=3.0),
]


def _values(t):
    return [float(v) for v in t.flatten().tolist()]


def _scalar(t):
    v = t.item()
    return int(v) if isinstance(v, int) else float(v)


def _run(sched, steps, seed):
    sched.set_timesteps(steps)
    gen = torch.Generator().manual_seed(seed)
    sample = torch.randn(SHAPE, generator=gen, dtype=torch.float32)
    case = {
        "shape": list(SHAPE),
        "timesteps": [_scalar(t) for t in sched.timesteps],
        "sigmas": [float(s) for s in sched.sigmas.tolist()],
        "sample": _values(sample),
        "model_outputs": [],
        "samples": [],
    }
    for t in sched.timesteps:
        out = torch.randn(SHAPE, generator=gen, dtype=torch.float32)
        sample = sched.step(out, t, sample, return_dict=False)[0]
        case["model_outputs"].append(_values(out))
        case["samples"].append(_values(sample))
    return case


def scheduler_references(path):
    cases = []
    for i, c in enumerate(UNIPC_CASES):
        c = dict(c)
        steps = c.pop("num_inference_steps")
        sched = UniPCMultistepScheduler(
            prediction_type="flow_prediction", use_flow_sigmas=True, num_train_timesteps=1000, **c
        )
        case = {"scheduler": "unipc", "num_inference_steps": steps, "settings": c}
        case.update(_run(sched, steps, seed=100 + i))
        cases.append(case)
    for i, c in enumerate(EULER_CASES):
        c = dict(c)
        steps = c.pop("num_inference_steps")
        sched = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, **c)
        case = {"scheduler": "flow_match_euler", "num_inference_steps": steps, "settings": c}
        case.update(_run(sched, steps, seed=200 + i))
        cases.append(case)
    with open(path, "w") as f:
        json.dump({"made_by": "scripts/video/scheduler_refs.py", "cases": cases}, f)
        f.write("\n")
