#!/usr/bin/env python3
"""Tiny random-weight Wan models and diffusers' reference outputs on them (issue 35).

Builds, with fixed seeds:
  * a tiny tokenizer (a Unigram model trained here with `tokenizers`, laid out like UMT5's:
    <pad>=0, </s>=1, <unk>=2, Metaspace, "$A </s>"),
  * a tiny UMT5EncoderModel (transformers),
  * a tiny AutoencoderKLWan (Wan 2.1 VAE structure, z_dim 16),
  * a tiny Wan 2.1-style T2V WanTransformer3DModel (16 -> 16 channels),
  * two tiny Wan 2.2 A14B-style I2V WanTransformer3DModels (36 -> 16 channels, high-noise and
    low-noise experts switched at `boundary_ratio`), which condition on the VAE-encoded first
    frame concatenated to the noise, with no CLIP image encoder,
saves them as diffusers folders (safetensors, f32) under tests/data/video/tiny-wan/, then runs
diffusers' own WanPipeline / WanImageToVideoPipeline on the CPU from those saved folders with
an explicit initial noise and records every intermediate a Rust port must reproduce under
tests/data/video/ref/ (see tests/data/video/README.md for the layout).

usage: make_tiny_wan.py [--out tests/data/video]
"""

import argparse
import collections
import html
import json
import math
import os
import re
import shutil
import unicodedata

import numpy as np
import torch
from PIL import Image

import diffusers
import transformers
import tokenizers
from diffusers import (
    AutoencoderKLWan,
    FlowMatchEulerDiscreteScheduler,
    UniPCMultistepScheduler,
    WanImageToVideoPipeline,
    WanPipeline,
    WanTransformer3DModel,
)
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors
from transformers import AutoTokenizer, T5TokenizerFast, UMT5Config, UMT5EncoderModel

from scheduler_refs import scheduler_references

# --- the tiny configurations -------------------------------------------------------------------

TOKENIZER_VOCAB = 512  # an upper bound on the pieces build_tokenizer collects
UMT5 = dict(
    d_model=40,
    d_kv=8,
    num_heads=4,  # inner dim 32 != d_model on purpose: catches transposed projections
    d_ff=64,
    num_layers=2,
    num_decoder_layers=0,
    relative_attention_num_buckets=32,  # umt5-xxl's values
    relative_attention_max_distance=128,
    feed_forward_proj="gated-gelu",  # umt5-xxl: gelu_new (tanh) gate
    layer_norm_epsilon=1e-6,
    dropout_rate=0.0,
    tie_word_embeddings=False,
    pad_token_id=0,
    eos_token_id=1,
    decoder_start_token_id=0,
)
DIT = dict(
    patch_size=(1, 2, 2),
    num_attention_heads=2,
    attention_head_dim=16,  # rope split t/h/w = 8/4/4 (real 128: 44/42/42)
    in_channels=16,
    out_channels=16,
    text_dim=UMT5["d_model"],
    freq_dim=64,
    ffn_dim=48,
    num_layers=2,
    cross_attn_norm=True,
    qk_norm="rms_norm_across_heads",
    eps=1e-6,
    rope_max_seq_len=1024,
)
DIT_I2V = dict(DIT, in_channels=36)  # 16 noise + 4 first-frame mask + 16 VAE latent of the image
VAE = dict(
    base_dim=8,
    z_dim=16,
    dim_mult=[1, 2, 2, 2],  # 3 spatial halvings: 8x like the real [1, 2, 4, 4]
    num_res_blocks=1,
    attn_scales=[],
    temperal_downsample=[False, True, True],
)

# --- the reference runs --------------------------------------------------------------------------

HEIGHT, WIDTH, FRAMES, STEPS = 48, 64, 5, 4  # non-square on purpose; latent 16 x 2 x 6 x 8
MAX_SEQ = 24  # the pipeline pads the text to this (its default is 512)
PROMPT = "A red fox runs  through fresh snow at dawn."
NEGATIVE = "blurry, static, low quality"
T2V_CFG = 5.0
T2V_SHIFT = 3.0  # Wan 2.1's diffusers default (480P)
I2V_CFG, I2V_CFG2 = 4.0, 3.0
I2V_SHIFT = 5.0
I2V_BOUNDARY = 0.9  # Wan 2.2 I2V A14B's boundary_ratio
NOISE_SEED = 1234

CORPUS = [
    "A red fox runs through fresh snow at dawn.",
    "A cat and a dog bake a cake together in a sunny kitchen.",
    "Waves crash on a rocky shore under a grey sky.",
    "A small boat drifts across a calm lake at sunset.",
    "Children fly bright kites over a green hill.",
    "A train crosses an old stone bridge in the mountains.",
    "Rain falls on a quiet city street at night, neon lights reflect in puddles.",
    "An astronaut walks slowly on the surface of the moon.",
    "A hummingbird hovers near a purple flower in the garden.",
    "Blurry, static, low quality, overexposed, worst quality, jpeg artifacts.",
    "Ugly, deformed, extra fingers, poorly drawn hands, messy background.",
    "A chef slices fresh vegetables on a wooden board.",
    "Snow falls softly on a pine forest while a deer watches.",
    "A robot paints a portrait of a smiling woman.",
    "Golden light streams through the window of a cozy library.",
    "A horse gallops across a wide field of tall grass.",
    "Fireworks burst above the river during the festival.",
    "A slow motion shot of coffee poured into a white cup.",
    "The camera pans over a desert with red sand dunes.",
    "A jellyfish glows in the deep blue ocean.",
]


def seed(n):
    torch.manual_seed(n)
    np.random.seed(n)


def build_tokenizer(folder):
    """A Unigram model built, not trained, from CORPUS (tokenizers' trainer gives slightly
    different scores and piece order from run to run): every word as a `▁word` piece, every
    character, and a few suffixes, each scored log(count / total). Words absent from the corpus
    (e.g. lowercase "blurry") split into suffixes and characters."""
    counts = collections.Counter()
    for line in CORPUS:
        text = unicodedata.normalize("NFKC", line)
        for word in re.findall(r"\w+", text):
            counts["▁" + word] += 1
            for suffix in ("ing", "ed", "ly", "er", "s"):
                if word.endswith(suffix) and len(word) > len(suffix) + 2:
                    counts[suffix] += 1
        for ch in text.replace(" ", "▁"):
            counts[ch] += 1
        counts["▁"] += 1
    total = sum(counts.values())
    pieces = sorted(((p, round(math.log(c / total), 6)) for p, c in counts.items()), key=lambda ps: (-ps[1], ps[0]))
    assert len(pieces) + 3 <= TOKENIZER_VOCAB
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + pieces
    tok = tokenizers.Tokenizer(models.Unigram(vocab, unk_id=2, byte_fallback=False))
    tok.add_special_tokens(["<pad>", "</s>", "<unk>"])
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))]
    )
    assert [tok.token_to_id(t) for t in ("<pad>", "</s>", "<unk>")] == [0, 1, 2]
    fast = T5TokenizerFast(
        tokenizer_object=tok, eos_token="</s>", unk_token="<unk>", pad_token="<pad>", extra_ids=0
    )
    fast.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def build_components(out):
    t2v_dir = os.path.join(out, "tiny-wan", "t2v")
    i2v_dir = os.path.join(out, "tiny-wan", "i2v")
    for d in (t2v_dir, i2v_dir):
        shutil.rmtree(d, ignore_errors=True)
    tok_tmp = os.path.join(out, "tiny-wan", ".tokenizer-tmp")
    tokenizer = build_tokenizer(tok_tmp)
    shutil.rmtree(tok_tmp)

    seed(1)
    text_encoder = UMT5EncoderModel(UMT5Config(vocab_size=len(tokenizer), **UMT5)).eval()
    seed(2)
    vae = AutoencoderKLWan(**VAE).eval()
    seed(3)
    transformer = WanTransformer3DModel(**DIT).eval()
    seed(4)
    i2v_high = WanTransformer3DModel(**DIT_I2V).eval()
    seed(5)
    i2v_low = WanTransformer3DModel(**DIT_I2V).eval()

    unipc_t2v = UniPCMultistepScheduler(
        prediction_type="flow_prediction", use_flow_sigmas=True, num_train_timesteps=1000, flow_shift=T2V_SHIFT
    )
    WanPipeline(
        tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, scheduler=unipc_t2v, transformer=transformer
    ).save_pretrained(t2v_dir, safe_serialization=True)

    unipc_i2v = UniPCMultistepScheduler(
        prediction_type="flow_prediction", use_flow_sigmas=True, num_train_timesteps=1000, flow_shift=I2V_SHIFT
    )
    WanImageToVideoPipeline(
        tokenizer=tokenizer,
        text_encoder=text_encoder,
        vae=vae,
        scheduler=unipc_i2v,
        transformer=i2v_high,
        transformer_2=i2v_low,
        boundary_ratio=I2V_BOUNDARY,
    ).save_pretrained(i2v_dir, safe_serialization=True)
    # The i2v folder shares the text encoder, tokenizer and VAE with t2v: keep one copy (t2v's).
    for shared in ("text_encoder", "tokenizer", "vae"):
        a, b = os.path.join(t2v_dir, shared), os.path.join(i2v_dir, shared)
        for name in os.listdir(a):
            with open(os.path.join(a, name), "rb") as fa, open(os.path.join(b, name), "rb") as fb:
                assert fa.read() == fb.read(), f"{shared}/{name} differs between t2v and i2v"
        shutil.rmtree(b)
    return t2v_dir, i2v_dir


# --- recording -----------------------------------------------------------------------------------


class Recorder:
    """Writes tensors as little-endian f32 (or u8) files and remembers their shapes."""

    def __init__(self, folder):
        self.folder = folder
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        self.files = {}

    def put(self, name, tensor, dtype="f32"):
        arr = tensor.detach().cpu().numpy() if isinstance(tensor, torch.Tensor) else np.asarray(tensor)
        arr = np.ascontiguousarray(arr.astype("<f4" if dtype == "f32" else np.uint8))
        fname = f"{name}.{dtype}"
        arr.tofile(os.path.join(self.folder, fname))
        self.files[name] = {"file": fname, "dtype": dtype, "shape": list(arr.shape)}
        return name

    def write_manifest(self, manifest):
        manifest["files"] = self.files
        with open(os.path.join(self.folder, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")


def prompt_clean(text):
    # WanPipeline's own cleaning, less ftfy.fix_text (the identity on these ASCII prompts).
    text = html.unescape(html.unescape(text)).strip()
    return re.sub(r"\s+", " ", text).strip()


def scalar(t):
    v = t.item() if isinstance(t, torch.Tensor) else t
    return int(v) if isinstance(v, int) else float(v)


def scheduler_config(s):
    return {k: v for k, v in dict(s.config).items() if not k.startswith("_")}


def instrument(pipe, rec, experts):
    """Hooks the pipeline's transformer calls, scheduler steps, prompt encoding and VAE."""
    calls, steps, extra = [], [], {}

    for name, model in experts.items():

        def hook(module, args, kwargs, output, name=name):
            calls.append(
                {
                    "expert": name,
                    "timestep": kwargs["timestep"].detach().clone(),
                    "hidden_states": kwargs["hidden_states"].detach().clone(),
                    "output": output[0].detach().clone(),
                }
            )

        model.register_forward_hook(hook, with_kwargs=True)

    step = pipe.scheduler.step

    def step_wrapper(model_output, timestep, sample, *a, **k):
        prev = step(model_output, timestep, sample, *a, **k)
        steps.append({"guided": model_output.clone(), "timestep": timestep, "prev": prev[0].clone()})
        return prev

    pipe.scheduler.step = step_wrapper

    encode_prompt = pipe.encode_prompt

    def encode_wrapper(*a, **k):
        out = encode_prompt(*a, **k)
        extra["prompt_embeds"], extra["negative_prompt_embeds"] = out
        return out

    pipe.encode_prompt = encode_wrapper

    decode = pipe.vae.decode

    def decode_wrapper(z, *a, **k):
        out = decode(z, *a, **k)
        extra["vae_input"] = z.clone()
        extra["frames_raw"] = out[0].clone()
        return out

    pipe.vae.decode = decode_wrapper

    encode = pipe.vae.encode

    def vae_encode_wrapper(x, *a, **k):
        out = encode(x, *a, **k)
        extra["vae_encode_moments"] = out.latent_dist.parameters.clone()
        return out

    pipe.vae.encode = vae_encode_wrapper
    return calls, steps, extra


def record_run(pipe, rec, experts, tokenizer, settings, call):
    calls, steps, extra = instrument(pipe, rec, experts)
    noise = torch.randn(
        (1, 16, (FRAMES - 1) // 4 + 1, HEIGHT // 8, WIDTH // 8),
        generator=torch.Generator().manual_seed(NOISE_SEED),
        dtype=torch.float32,
    )
    rec.put("noise", noise)
    frames = call(noise.clone())
    sched = pipe.scheduler

    tokens = {}
    for key, text in (("prompt", PROMPT), ("negative_prompt", NEGATIVE)):
        enc = tokenizer(
            prompt_clean(text), padding="max_length", max_length=MAX_SEQ, truncation=True, add_special_tokens=True
        )
        tokens[key] = {"text": text, "cleaned": prompt_clean(text), "ids": enc.input_ids, "mask": enc.attention_mask}
    rec.put("prompt_embeds", extra["prompt_embeds"])
    rec.put("negative_prompt_embeds", extra["negative_prompt_embeds"])

    assert len(calls) == 2 * len(steps), (len(calls), len(steps))
    per_step = []
    for i, s in enumerate(steps):
        cond, uncond = calls[2 * i], calls[2 * i + 1]
        assert cond["expert"] == uncond["expert"]
        if i == 0:
            rec.put("transformer_input_step0", cond["hidden_states"])
        ts = cond["timestep"]
        per_step.append(
            {
                "index": i,
                "timestep": scalar(s["timestep"]),
                "transformer_timestep": ts.flatten().tolist() if ts.numel() > 1 else scalar(ts.flatten()[0]),
                "expert": cond["expert"],
                "sigma": scalar(sched.sigmas[i]),
                "sigma_next": scalar(sched.sigmas[i + 1]),
                "cond": rec.put(f"step{i}_cond", cond["output"]),
                "uncond": rec.put(f"step{i}_uncond", uncond["output"]),
                "guided": rec.put(f"step{i}_guided", s["guided"]),
                "latents": rec.put(f"step{i}_latents", s["prev"]),
            }
        )
    rec.put("vae_input", extra["vae_input"])
    rec.put("frames_raw", extra["frames_raw"])
    u8 = (frames[0] * 255).round().astype(np.uint8)  # diffusers' numpy_to_pil rounding
    rec.put("frames", u8, dtype="u8")
    if "vae_encode_moments" in extra:
        # The encoder's input is image_pixels as frame 0 then num_frames - 1 zero frames.
        rec.put("vae_encode_moments", extra["vae_encode_moments"])

    rec.write_manifest(
        {
            "made_by": "scripts/video/make_tiny_wan.py",
            "versions": {
                "torch": torch.__version__,
                "diffusers": diffusers.__version__,
                "transformers": transformers.__version__,
                "tokenizers": tokenizers.__version__,
            },
            **settings,
            "height": HEIGHT,
            "width": WIDTH,
            "num_frames": FRAMES,
            "num_inference_steps": STEPS,
            "max_sequence_length": MAX_SEQ,
            "noise_seed": NOISE_SEED,
            "scheduler": {"class": type(sched).__name__, "config": scheduler_config(sched)},
            "timesteps": [scalar(t) for t in sched.timesteps],
            "sigmas": [scalar(s) for s in sched.sigmas],
            "tokens": tokens,
            "steps": per_step,
            "figures": {
                "frames_raw_min": float(extra["frames_raw"].min()),
                "frames_raw_max": float(extra["frames_raw"].max()),
                "frames_raw_clamped_fraction": float((extra["frames_raw"].abs() >= 1.0).float().mean()),
                "latents_final_abs_max": float(steps[-1]["prev"].abs().max()),
            },
        }
    )


def make_image(path):
    """A smooth synthetic RGB first frame (gradients and a disc), WIDTH x HEIGHT."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    r = 255 * x / (WIDTH - 1)
    g = 255 * y / (HEIGHT - 1)
    b = 128 + 100 * np.sin(x / 7.0) * np.cos(y / 5.0)
    disc = (x - 40) ** 2 + (y - 20) ** 2 < 12**2
    r[disc], g[disc], b[disc] = 250, 220, 40
    img = np.stack([r, g, b], -1).round().clip(0, 255).astype(np.uint8)
    Image.fromarray(img).save(path)
    return Image.open(path).convert("RGB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "video"))
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    torch.set_grad_enabled(False)

    t2v_dir, i2v_dir = build_components(out)
    ref = os.path.join(out, "ref")

    # Everything below runs from the saved folders, so the references are the shipped models'.
    shared = dict(
        tokenizer=AutoTokenizer.from_pretrained(os.path.join(t2v_dir, "tokenizer")),
        text_encoder=UMT5EncoderModel.from_pretrained(os.path.join(t2v_dir, "text_encoder")),
        vae=AutoencoderKLWan.from_pretrained(os.path.join(t2v_dir, "vae")),
    )
    common = dict(
        prompt=PROMPT,
        negative_prompt=NEGATIVE,
        height=HEIGHT,
        width=WIDTH,
        num_frames=FRAMES,
        num_inference_steps=STEPS,
        max_sequence_length=MAX_SEQ,
        output_type="np",
    )

    schedulers = {
        "t2v-unipc": UniPCMultistepScheduler.from_pretrained(os.path.join(t2v_dir, "scheduler")),
        "t2v-euler": FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=T2V_SHIFT),
    }
    for name, sched in schedulers.items():
        pipe = WanPipeline.from_pretrained(t2v_dir)
        pipe.scheduler = sched
        pipe.set_progress_bar_config(disable=True)
        record_run(
            pipe,
            Recorder(os.path.join(ref, name)),
            {"transformer": pipe.transformer},
            pipe.tokenizer,
            {"pipeline": "WanPipeline", "mode": "t2v", "guidance_scale": T2V_CFG, "prompt": PROMPT,
             "negative_prompt": NEGATIVE},
            lambda noise: pipe(**common, guidance_scale=T2V_CFG, latents=noise).frames,
        )

    image_path = os.path.join(ref, "first_frame.png")
    image = make_image(image_path)
    pipe = WanImageToVideoPipeline.from_pretrained(i2v_dir, **shared)
    pipe.set_progress_bar_config(disable=True)
    rec = Recorder(os.path.join(ref, "i2v-unipc"))
    rec.put("image_pixels", pipe.video_processor.preprocess(image, height=HEIGHT, width=WIDTH))
    record_run(
        pipe,
        rec,
        {"transformer": pipe.transformer, "transformer_2": pipe.transformer_2},
        pipe.tokenizer,
        {"pipeline": "WanImageToVideoPipeline", "mode": "i2v", "image": "../first_frame.png",
         "guidance_scale": I2V_CFG, "guidance_scale_2": I2V_CFG2, "boundary_ratio": I2V_BOUNDARY,
         "prompt": PROMPT, "negative_prompt": NEGATIVE},
        lambda noise: pipe(image=image, **common, guidance_scale=I2V_CFG, guidance_scale_2=I2V_CFG2,
                           latents=noise).frames,
    )

    scheduler_references(os.path.join(ref, "schedulers.json"))
    report_sizes(out)


def report_sizes(out):
    for root, _, names in sorted(os.walk(os.path.join(out, "tiny-wan"))):
        for n in sorted(names):
            if n.endswith(".safetensors"):
                from safetensors import safe_open

                p = os.path.join(root, n)
                with safe_open(p, "pt") as f:
                    count = sum(f.get_tensor(k).numel() for k in f.keys())
                print(f"{os.path.relpath(p, out)}: {count} parameters, {os.path.getsize(p)} bytes")


if __name__ == "__main__":
    main()
