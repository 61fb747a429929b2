"""Builds the tiny random-weight vision-language models the vision references are made from.

Each family keeps the structure of the real model's vision side (image size, patch size,
pooling / merge / pixel-shuffle factors, window sizes) and shrinks only width and depth, so
every code path of a real encoder runs, at a size that can live in the repository.

Weights are seeded per tensor name (crc32 of the name), so a tensor's values do not depend on
the order in which modules are built. Every value is rounded to the nearest float16 before the
model is saved: the f16 mmproj that llama.cpp's converter writes then holds exactly the weights
transformers runs with, and the comparison measures the two implementations, not the rounding.
Scales follow 1/sqrt(fan_in) rather than transformers' 0.02 init, so attention is far from
uniform and the test images give distinct outputs.

Usage: python tiny_models.py FAMILY OUT_DIR [TOKENIZER_GGUF]   (FAMILY: gemma3 | qwen25vl | idefics3)
TOKENIZER_GGUF: the real model whose tokenizer the tiny text side uses (qwen25vl, idefics3).
"""
import json
import math
import sys
import zlib
from pathlib import Path

import torch


def seeded_(model: torch.nn.Module, seed: int) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
            n = torch.randn(p.shape, generator=g, dtype=torch.float32)
            leaf = name.rsplit(".", 1)[-1]
            if "norm" in name or "layernorm" in name or "ln_" in name:
                if name.endswith("mm_soft_emb_norm.weight") or "Gemma3RMSNorm" in type(p).__name__:
                    val = 0.1 * n  # Gemma RMSNorm stores w, applies (1 + w)
                elif leaf == "weight":
                    val = 1.0 + 0.1 * n
                else:
                    val = 0.05 * n
            elif leaf == "bias":
                val = 0.05 * n
            elif "position_embedding" in name or "pos_embed" in name:
                val = 0.5 * n
            elif p.ndim >= 2:
                fan_in = p[0].numel() if p.ndim > 2 else p.shape[1]
                if name.endswith("mm_input_projection_weight"):
                    fan_in = p.shape[0]  # used as x @ W, W is [in, out]
                if "embed_tokens" in name:
                    fan_in = 1
                val = n / math.sqrt(fan_in)
            else:
                val = 0.05 * n
            p.copy_(val.half().float())


def name_architecture(out: Path, arch: str) -> None:
    """transformers 4.57 leaves "architectures" out of some composite configs; llama.cpp's
    converter picks its model class by that name."""
    p = out / "config.json"
    cfg = json.loads(p.read_text())
    if not cfg.get("architectures"):
        cfg["architectures"] = [arch]
        p.write_text(json.dumps(cfg, indent=2) + "\n")


def gemma3(out: Path, seed: int = 1) -> None:
    """Gemma 3 vision: SigLIP ViT at 896 px, 14 px patches (64x64 = 4096 patches), 4x4 average
    pool to 256 tokens, RMS-normed and projected to the text width. The text width is 640, that
    of the real Gemma 3 270M, so llama.cpp can run that real text model with this mmproj. The
    text side saved here is a one-layer stand-in with a small vocabulary: only the vision tower
    and projector are converted (--mmproj); the real 270M GGUF is the language model."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3ImageProcessor

    cfg = Gemma3Config(
        text_config=dict(
            hidden_size=640, intermediate_size=256, num_hidden_layers=1, num_attention_heads=4,
            num_key_value_heads=1, head_dim=256, vocab_size=1024, max_position_embeddings=32768,
            sliding_window=512, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
        ),
        vision_config=dict(
            hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
            image_size=896, patch_size=14, layer_norm_eps=1e-6, vision_use_head=False,
            hidden_act="gelu_pytorch_tanh",
        ),
        mm_tokens_per_image=256, boi_token_index=255999, eoi_token_index=256000,
        image_token_index=262144,
    )
    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(cfg).eval()
    seeded_(model, seed)
    model.save_pretrained(out, safe_serialization=True)
    Gemma3ImageProcessor(
        do_resize=True, size={"height": 896, "width": 896}, resample=2, do_rescale=True,
        rescale_factor=1 / 255, do_normalize=True, image_mean=[0.5] * 3, image_std=[0.5] * 3,
        do_convert_rgb=True, do_pan_and_scan=False,
    ).save_pretrained(out)
    with open(out / "processor_config.json", "w") as f:
        json.dump({"image_seq_length": 256, "processor_class": "Gemma3Processor"}, f)


def qwen25vl(out: Path, seed: int = 2, tokenizer_gguf: Path | None = None) -> None:
    """Qwen2.5-VL: ViT with 14 px patches, temporal patch 2 (the image is doubled), 2-D rotary
    positions, window attention on 112 px windows with full attention every second block (the
    real model: every eighth of 32), SwiGLU MLPs, RMSNorm, 2x2 patch merger. The text side is a
    2-layer Qwen2-VL decoder, 32 wide (M-RoPE, sections [2, 3, 3] of a 16-dim head's 8 rotary
    pairs) with the real Qwen2.5 tokenizer, read from the Qwen2.5 GGUF in the models directory.
    Its output matrix is not tied to the embeddings: a random tied model repeats its input token
    forever, an untied one gives greedy runs with varied tokens."""
    from transformers import AutoTokenizer, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    from transformers import Qwen2VLImageProcessor

    tok = AutoTokenizer.from_pretrained(tokenizer_gguf.parent, gguf_file=tokenizer_gguf.name)
    hidden = 32
    cfg = Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=151936, hidden_size=hidden, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32768,
            rms_norm_eps=1e-6, rope_theta=1_000_000.0, tie_word_embeddings=False,
            rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
        ),
        vision_config=dict(
            depth=4, hidden_size=64, intermediate_size=128, num_heads=2, patch_size=14,
            spatial_merge_size=2, temporal_patch_size=2, window_size=112, out_hidden_size=hidden,
            fullatt_block_indexes=[1, 3], hidden_act="silu",
        ),
        rms_norm_eps=1e-6, tie_word_embeddings=False,
        image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
        vision_end_token_id=151653,
    )
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(cfg).eval()
    seeded_(model, seed)
    model.save_pretrained(out, safe_serialization=True)
    name_architecture(out, "Qwen2_5_VLForConditionalGeneration")
    tok.save_pretrained(out)
    # token limits as llama.cpp's mtmd applies them to Qwen2.5-VL (8 to 4096 merged tokens of
    # 28x28 px), so both implementations pick the same grid
    Qwen2VLImageProcessor(
        min_pixels=8 * 28 * 28, max_pixels=4096 * 28 * 28, patch_size=14, temporal_patch_size=2,
        merge_size=2, image_mean=[0.48145466, 0.4578275, 0.40821073],
        image_std=[0.26862954, 0.26130258, 0.27577711], resample=3,
    ).save_pretrained(out)


def idefics3(out: Path, seed: int = 3, tokenizer_gguf: Path | None = None) -> None:
    """SmolVLM / Idefics3 as in SmolVLM-256M: SigLIP ViT on 512 px tiles with 16 px patches
    (32x32 = 1024 patches), pixel shuffle by 4 (1024 -> 64 tokens of 16x width), a linear
    connector to the text width. Images are resized to a 2048 px longest edge and cut into
    512 px tiles plus a 512 px overview. The text side is a 2-layer Llama decoder, 32 wide,
    untied output, with the real SmolLM2 tokenizer (from the SmolLM2 GGUF in the models
    directory) plus SmolVLM's image tokens."""
    from transformers import AutoTokenizer, Idefics3Config, Idefics3ForConditionalGeneration
    from transformers import Idefics3ImageProcessor

    tok = AutoTokenizer.from_pretrained(tokenizer_gguf.parent, gguf_file=tokenizer_gguf.name)
    extra = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"]
    extra += [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]
    tok.add_special_tokens({"additional_special_tokens": extra})
    hidden = 32
    cfg = Idefics3Config(
        vision_config=dict(
            hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
            image_size=512, patch_size=16, hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6,
        ),
        text_config=dict(
            model_type="llama", architectures=["LlamaForCausalLM"], vocab_size=49280,
            hidden_size=hidden, intermediate_size=96, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, max_position_embeddings=8192, rms_norm_eps=1e-5,
            rope_theta=100000.0, tie_word_embeddings=False, bos_token_id=tok.bos_token_id,
            eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
            pad_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        ),
        scale_factor=4, image_token_id=tok.convert_tokens_to_ids("<image>"), tie_word_embeddings=False,
        pad_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
    )
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(cfg).eval()
    seeded_(model, seed)
    model.save_pretrained(out, safe_serialization=True)
    name_architecture(out, "Idefics3ForConditionalGeneration")
    tok.save_pretrained(out)
    # a tokenizer read from a GGUF saves that GGUF as "tokenizer.model"; it is a BPE tokenizer,
    # tokenizer.json describes it fully, and the converter would take the file for SentencePiece.
    # transformers' rebuild of it is only approximate (llama.cpp's converter does not recognize
    # its pre-tokenizer), so the text GGUF's tokenizer is replaced afterwards by the real
    # SmolLM2 one (gguf_vocab.py); this folder's tokenizer serves only the conversion.
    (out / "tokenizer.model").unlink(missing_ok=True)
    Idefics3ImageProcessor(
        do_convert_rgb=True, do_resize=True, size={"longest_edge": 4 * 512}, resample=1,
        do_image_splitting=True, max_image_size={"longest_edge": 512}, do_rescale=True,
        rescale_factor=1 / 255, do_normalize=True, image_mean=[0.5] * 3, image_std=[0.5] * 3,
        do_pad=True,
    ).save_pretrained(out)


FAMILIES = {"gemma3": gemma3, "qwen25vl": qwen25vl, "idefics3": idefics3}

if __name__ == "__main__":
    fam, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    if fam == "gemma3":
        FAMILIES[fam](out)
    else:
        FAMILIES[fam](out, tokenizer_gguf=Path(sys.argv[3]))
    print("wrote", out)
