"""Runs transformers on the tiny vision models and compares with llama.cpp mtmd's dumps.

usage: python hf_reference.py FAMILY HF_DIR REF_DIR IMAGE_DIR

REF_DIR holds what mtmd_ref wrote (S.pixels.f32, S.embd.f32, S.rgb and mtmd.jsonl). For each
image this script
  * runs transformers' get_image_features on mtmd's exact pixel tensor: S.hf_embd.f32 (f32 LE,
    [n_tokens][n_embd]), which compares the two encoders apart from preprocessing;
  * runs transformers' own image processor on the image file and get_image_features on that,
    and records how far it lands from mtmd (index.json) - preprocessing differs by design;
  * turns mtmd's pixel tensor into lossless PNGs of the u8 image it was normalized from
    (S.pixels.K.png, one per encoder input), checking bit for bit that (v/255 - mean)/std in
    f32 gives back mtmd's tensor, so the 9.6 MB f32 tensors need not be shipped;
and writes index.json with the shapes, hashes and the figures (cosine, max-abs) per image.
"""
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image


def cos_maxabs(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    return cos, float(np.max(np.abs(a - b)))


def per_token_min_cos(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    num = (a * b).sum(-1)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return float((num / den).min())


def u8_from_pixels(px: np.ndarray, mean, std) -> np.ndarray:
    """Inverts mtmd's from_u8 + normalize exactly; raises if the tensor is not of that form."""
    mean = np.asarray(mean, np.float32).reshape(3, 1, 1)
    std = np.asarray(std, np.float32).reshape(3, 1, 1)
    v = np.rint(((px * std + mean) * np.float32(255)).astype(np.float64)).clip(0, 255).astype(np.uint8)
    back = ((v.astype(np.float32) / np.float32(255.0)) - mean) / std
    if not np.array_equal(back.astype(np.float32).view(np.uint32), px.astype(np.float32).view(np.uint32)):
        raise SystemExit("pixel tensor is not (u8/255 - mean)/std: cannot store it as PNG")
    return v


class Gemma3:
    def __init__(self, hf_dir: Path):
        from transformers import Gemma3ForConditionalGeneration, Gemma3ImageProcessor

        self.model = Gemma3ForConditionalGeneration.from_pretrained(hf_dir, dtype=torch.float32).eval()
        self.proc = Gemma3ImageProcessor.from_pretrained(hf_dir)
        self.mean, self.std = self.proc.image_mean, self.proc.image_std

    def hf_pixels(self, img: Image.Image) -> dict:
        return {"pixel_values": self.proc(images=img, return_tensors="pt")["pixel_values"]}

    def features(self, inputs: dict) -> np.ndarray:
        with torch.no_grad():
            f = self.model.get_image_features(inputs["pixel_values"])
        return f.reshape(-1, f.shape[-1]).numpy()

    def from_mtmd(self, px: np.ndarray, shapes: list) -> dict:
        return {"pixel_values": torch.from_numpy(px.reshape(shapes[0]))}

    def preprocessing_note(self) -> str:
        return ("transformers' Gemma3ImageProcessor resizes straight to 896x896 (aspect ratio not kept, "
                "PIL bilinear); mtmd keeps the aspect ratio: it scales the image to fit 896x896 "
                "(Pillow-style bilinear in 22-bit fixed point, size = ceil(side*scale)), centres it "
                "((896 - new) / 2, integer division) on black (0,0,0) and normalizes the padding too. "
                "Both then map v -> (v/255 - 0.5)/0.5.")


class Qwen25VL:
    same_layout = False  # transformers feeds flattened 2x14x14 patches, mtmd a planar image

    def __init__(self, hf_dir: Path):
        from transformers import Qwen2_5_VLForConditionalGeneration, Qwen2VLImageProcessor

        self.model = Qwen2_5_VLForConditionalGeneration.from_pretrained(hf_dir, dtype=torch.float32).eval()
        self.proc = Qwen2VLImageProcessor.from_pretrained(hf_dir)
        self.mean, self.std = self.proc.image_mean, self.proc.image_std

    def hf_pixels(self, img: Image.Image) -> dict:
        out = self.proc(images=img, return_tensors="pt")
        return {"pixel_values": out["pixel_values"], "image_grid_thw": out["image_grid_thw"]}

    def features(self, inputs: dict) -> np.ndarray:
        with torch.no_grad():
            f = self.model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"])
        return torch.cat(list(f), 0).numpy()

    def from_mtmd(self, px: np.ndarray, shapes: list) -> dict:
        # mtmd's normalized image, patchified by transformers' own code with every pixel step off
        b, c, h, w = shapes[0]
        img = px[: b * c * h * w].reshape(c, h, w)
        out = self.proc(images=img, do_resize=False, do_rescale=False, do_normalize=False,
                        input_data_format="channels_first", return_tensors="pt")
        return {"pixel_values": out["pixel_values"], "image_grid_thw": out["image_grid_thw"]}

    def preprocessing_note(self) -> str:
        return ("Both pick the same grid (side rounded to a multiple of 28, then scaled into 8..4096 "
                "merged tokens: transformers' smart_resize and mtmd agree when given the same limits, "
                "set here to mtmd's). transformers then resizes straight to that size (PIL bicubic); "
                "mtmd scales to fit inside it keeping the aspect ratio (Pillow-style bicubic, a=-0.5, "
                "22-bit fixed point, size = ceil(side*scale)) and pads the rest with black, centred. "
                "Normalization: CLIP mean/std. transformers feeds the encoder flattened "
                "[2 frames x 3 x 14 x 14] patches in 2x2 merge order; mtmd feeds the planar image and "
                "applies the two temporal kernel halves to the same frame.")


class Idefics3:
    same_layout = False  # tile order is the same, but transformers pads to a batch of tiles

    def __init__(self, hf_dir: Path):
        from transformers import Idefics3ForConditionalGeneration, Idefics3ImageProcessor

        self.model = Idefics3ForConditionalGeneration.from_pretrained(hf_dir, dtype=torch.float32).eval()
        self.proc = Idefics3ImageProcessor.from_pretrained(hf_dir)
        self.mean, self.std = self.proc.image_mean, self.proc.image_std

    def identity_positions(self, on: bool) -> None:
        """transformers 4.57's Idefics3VisionEmbeddings scales the patch coordinates by
        (1 - 1e-6) before bucketizing them on boundaries k/32, so patch k lands in bucket k-1:
        position ids per axis are 0, 0, 1, ..., 30 instead of 0..31. llama.cpp (and the
        original Idefics3 code) use 0..31. With `on`, a full tile gets position ids 0..n-1."""
        emb = self.model.model.vision_model.embeddings
        if not on:
            emb.forward = type(emb).forward.__get__(emb)
            return

        def forward(pixel_values, patch_attention_mask=None):
            x = emb.patch_embedding(pixel_values).flatten(2).transpose(1, 2)
            ids = torch.arange(x.shape[1]).expand(x.shape[0], -1)
            return x + emb.position_embedding(ids)

        emb.forward = forward

    def hf_pixels(self, img: Image.Image) -> dict:
        out = self.proc(images=[[img]], return_tensors="pt")
        return {"pixel_values": out["pixel_values"], "pixel_attention_mask": out["pixel_attention_mask"]}

    def features(self, inputs: dict) -> np.ndarray:
        with torch.no_grad():
            f = self.model.get_image_features(inputs["pixel_values"], inputs["pixel_attention_mask"])
        return f.reshape(-1, f.shape[-1]).numpy()

    def from_mtmd(self, px: np.ndarray, shapes: list) -> dict:
        tiles, off = [], 0
        for b, c, h, w in shapes:
            n = b * c * h * w
            tiles.append(px[off:off + n].reshape(b, c, h, w))
            off += n
        pv = torch.from_numpy(np.concatenate(tiles, 0))[None]
        mask = torch.ones(pv.shape[0], pv.shape[1], pv.shape[3], pv.shape[4], dtype=torch.bool)
        return {"pixel_values": pv, "pixel_attention_mask": mask}

    def preprocessing_note(self) -> str:
        return ("Both resize to a 2048 px longest edge (other side int(2048/aspect) made even), then to "
                "multiples of 512, cut 512 px tiles row by row and add a 512 px overview last; "
                "Lanczos. transformers resizes with PIL, mtmd with its Pillow-style fixed-point "
                "Lanczos: the tile grids match, pixel levels may differ by rounding. mean/std 0.5.")


Gemma3.same_layout = True
FAMILIES = {"gemma3": Gemma3, "qwen25vl": Qwen25VL, "idefics3": Idefics3}


def main() -> None:
    family, hf_dir, ref_dir, image_dir = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    torch.manual_seed(0)
    torch.set_num_threads(2)
    fam = FAMILIES[family](hf_dir)
    if hasattr(fam, "identity_positions"):
        fam.identity_positions(True)
    mtmd = [json.loads(line) for line in (ref_dir / "mtmd.jsonl").read_text().splitlines() if line.strip()]
    images = {p.stem: p for p in image_dir.iterdir()}
    index = {"family": family, "pixel_mean": list(map(float, fam.mean)), "pixel_std": list(map(float, fam.std)),
             "preprocessing_note": fam.preprocessing_note(), "images": []}
    for rec in mtmd:
        stem = rec["image"]
        n_embd = rec["n_embd"]
        embd = np.fromfile(ref_dir / f"{stem}.embd.f32", dtype="<f4").reshape(-1, n_embd)
        px = np.fromfile(ref_dir / f"{stem}.pixels.f32", dtype="<f4")
        shapes = rec["pixel_shapes"]

        # lossless PNGs of each encoder input
        pngs, off = [], 0
        for k, (b, c, h, w) in enumerate(shapes):
            n = b * c * h * w
            ent = px[off:off + n].reshape(b, c, h, w)
            off += n
            for bi in range(b):
                v = u8_from_pixels(ent[bi], fam.mean, fam.std)
                name = f"{stem}.pixels.{k}.png" if b == 1 else f"{stem}.pixels.{k}.{bi}.png"
                Image.fromarray(np.ascontiguousarray(v.transpose(1, 2, 0)), "RGB").save(ref_dir / name, optimize=True)
                pngs.append(name)
        assert off == px.size

        # the RGB bytes mtmd decoded (stb_image), kept losslessly as PNG: JPEG decoders differ by
        # a level or two, so a preprocessing test starts from these, a decoding test ends at them
        h, w = rec["decoded"]
        rgb = np.fromfile(ref_dir / f"{stem}.rgb", dtype=np.uint8).reshape(h, w, 3)
        Image.fromarray(rgb, "RGB").save(ref_dir / f"{stem}.decoded.png", optimize=True)

        img = Image.open(images[stem]).convert("RGB")
        pil_vs_stb = int(np.abs(np.asarray(img, np.int16) - rgb.astype(np.int16)).max())
        hf_in = fam.hf_pixels(img)
        hf = fam.features(hf_in)
        hf_on_mtmd = fam.features(fam.from_mtmd(px, shapes))
        raw_on_mtmd = None
        if hasattr(fam, "identity_positions"):
            fam.identity_positions(False)
            raw_on_mtmd = fam.features(fam.from_mtmd(px, shapes))
            fam.identity_positions(True)
        # shipped: transformers' encoder on mtmd's exact input, the reference an encoder that
        # preprocesses as mtmd does can be held to; transformers' own preprocessing is only
        # summarized (index.json), since it differs from mtmd's by design for most images
        hf_on_mtmd.astype("<f4").tofile(ref_dir / f"{stem}.hf_embd.f32")

        entry = {
            "image": images[stem].name,
            "decoded_hw": rec["decoded"],
            "decoded_png": f"{stem}.decoded.png",
            "decoded_pil_vs_mtmd_max_level_diff": pil_vs_stb,
            "pixel_shapes_bchw": shapes,
            "pixel_pngs": pngs,
            "pixels_f32_sha256": hashlib.sha256(px.astype("<f4").tobytes()).hexdigest(),
            "mtmd_embd": f"{stem}.embd.f32",
            "hf_embd": f"{stem}.hf_embd.f32",
            "embd_shape": list(embd.shape),
            "hf_own_preprocessing_embd_shape": list(hf.shape),
            "prompt_chunks": rec["chunks"],
            "greedy": rec["greedy"],
            "greedy_margin": rec["margin"],
            "greedy_top1_logit": rec["top1_logit"],
        }
        hf_px = hf_in["pixel_values"].numpy()
        if fam.same_layout and hf_px.size == px.size:
            entry["pixels_hf_vs_mtmd_maxabs"] = float(np.max(np.abs(hf_px.ravel() - px)))
        if hf.shape == embd.shape:
            c, m = cos_maxabs(hf, embd)
            entry["hf_own_preprocessing_vs_mtmd"] = {"cosine": c, "max_abs": m, "min_token_cosine": per_token_min_cos(hf, embd)}
        if hf_on_mtmd.shape == embd.shape:
            c, m = cos_maxabs(hf_on_mtmd, embd)
            entry["hf_vs_mtmd"] = {"cosine": c, "max_abs": m,
                                                  "min_token_cosine": per_token_min_cos(hf_on_mtmd, embd)}
        if raw_on_mtmd is not None and raw_on_mtmd.shape == embd.shape:
            c, m = cos_maxabs(raw_on_mtmd, embd)
            entry["hf_unpatched_positions_vs_mtmd"] = {"cosine": c, "max_abs": m}
            entry["hf_embd_note"] = ("hf_embd.f32 is transformers with patch position ids 0..n-1 as "
                                     "in llama.cpp (see Idefics3.identity_positions in hf_reference.py)")
        entry["embd_abs_max"] = float(np.abs(embd).max())
        index["images"].append(entry)
        print(stem, {k: entry.get(k) for k in ("pixels_hf_vs_mtmd_maxabs", "hf_vs_mtmd", "hf_own_preprocessing_vs_mtmd")},
              flush=True)
    (ref_dir / "index.json").write_text(json.dumps(index, indent=1) + "\n")


if __name__ == "__main__":
    main()
