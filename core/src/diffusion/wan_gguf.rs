//! Reading a Wan DiT GGUF in city96's ComfyUI-GGUF layout (what the reference server,
//! ComfyUI and stable-diffusion.cpp load; `weft convert` writes the same): tensors under Wan's
//! own names ([`super::wan_names`]), `general.architecture = wan`, any GGML type.
//!
//! Such a file carries no hyper-parameters: they are read off the tensor shapes, as ComfyUI's
//! model detection does — dim from `head.modulation`, ffn_dim from `blocks.0.ffn.0`, the
//! input channels and patch from the 5-D `patch_embedding.weight`, layers by counting blocks,
//! image cross-attention from `img_emb` / `k_img`. The head count is in no shape: the file's
//! `wan.attention.head_count` when present (ours), else `dim / 128` as ComfyUI and
//! stable-diffusion.cpp take it (true of every released Wan: 1536/12, 3072/24, 5120/40).
//!
//! 5-D tensors: ggml allows 4 dimensions, so city96's converter leaves `patch_embedding.weight`
//! out and `fix_5d_tensors.py` adds it back afterwards as a 5-D F32 tensor; gguf-py and
//! stable-diffusion.cpp's own reader accept it (the latter folds dims 4.. into dim 3). Both
//! forms are read here: 5-D, or 4-D with the channels folded into the last dimension.

use std::path::Path;

use super::files::ModelFileError;
use super::wan_dit::WanDitConfig;
use super::wan_names::{
    dit_diffusers_name, ARCH, COMFY_PREFIX, KEY_EPS, KEY_HEAD_COUNT, KEY_ROPE_MAX,
};
use crate::gguf::{parse_header, Gguf, ModelBytes, ModelFile};

/// What a Wan DiT file says about its model.
#[derive(Debug, Clone, PartialEq)]
pub struct WanDitInfo {
    pub config: WanDitConfig,
    /// Wan 2.1 I2V / FLF2V: the width of the CLIP image features (`img_emb.proj.1` input)
    /// that the image cross-attention (`k_img`, `v_img`) attends to. None for T2V, Wan 2.2
    /// and Wan 2.2 I2V (whose image enters as latent channels).
    pub image_dim: Option<usize>,
    /// Wan 2.1 FLF2V: the number of learned image-token positions (`img_emb.emb_pos`).
    pub image_pos_len: Option<usize>,
    /// Whether the head count came from the file (else `dim / 128`).
    pub heads_from_metadata: bool,
}

/// A tensor's shape in PyTorch order (outermost first).
fn shape(g: &Gguf, name: &str) -> Option<Vec<usize>> {
    g.tensor(name)
        .map(|t| t.dims.iter().rev().map(|&d| d as usize).collect())
}

/// Reads the config of the Wan DiT that header `g` (of the file at `path`, for messages)
/// describes, and checks that every tensor the config implies is there with its shape and
/// that there is no other.
pub fn dit_info(g: &Gguf, path: &Path) -> Result<WanDitInfo, ModelFileError> {
    let bad = |message: String| ModelFileError::Weights {
        path: path.display().to_string(),
        message,
    };
    match g.architecture() {
        Some(ARCH) => {}
        Some(other) => {
            return Err(bad(format!(
                "general.architecture is {other:?}, not \"{ARCH}\": not a Wan DiT file"
            )))
        }
        // stable-diffusion.cpp writes no architecture; ComfyUI then goes by the tensors.
        None if g.tensor("head.modulation").is_some()
            && g.tensor("blocks.0.self_attn.norm_q.weight").is_some() => {}
        None => {
            return Err(bad(
                "no general.architecture and no Wan DiT tensors (head.modulation): \
                 not a Wan DiT file"
                    .into(),
            ))
        }
    }
    let need = |name: &str| shape(g, name).ok_or_else(|| bad(format!("tensor {name} is missing")));
    let head_mod = need("head.modulation")?;
    let [1, 2, dim] = head_mod[..] else {
        return Err(bad(format!(
            "tensor head.modulation has shape {head_mod:?}, expected [1, 2, dim]"
        )));
    };
    if dim == 0 {
        return Err(bad("tensor head.modulation has a zero dimension".into()));
    }
    let ffn_dim = need("blocks.0.ffn.0.weight")?[0];
    let text_dim = *need("text_embedding.0.weight")?.last().unwrap_or(&0);
    let freq_dim = *need("time_embedding.0.weight")?.last().unwrap_or(&0);
    let patch = need("patch_embedding.weight")?;
    let (in_channels, patch_size) = match patch[..] {
        [d, c, pt, ph, pw] if d == dim => (c, [pt, ph, pw]),
        // Folded to 4 dims (ggml's limit): [dim * in, pt, ph, pw].
        [dc, pt, ph, pw] if dc.is_multiple_of(dim) => (dc / dim, [pt, ph, pw]),
        _ => {
            return Err(bad(format!(
                "tensor patch_embedding.weight has shape {patch:?}, expected \
                 [{dim}, in_channels, pt, ph, pw]"
            )))
        }
    };
    let volume: usize = patch_size.iter().product();
    let head_out = need("head.head.weight")?[0];
    if volume == 0 || in_channels == 0 || !head_out.is_multiple_of(volume) {
        return Err(bad(format!(
            "tensor head.head.weight has {head_out} rows, not a multiple of the patch volume \
             {volume} (patch {patch_size:?})"
        )));
    }
    let out_channels = head_out / volume;
    let mut num_layers = 0;
    while g
        .tensor(&format!("blocks.{num_layers}.ffn.0.weight"))
        .is_some()
    {
        num_layers += 1;
    }
    let (num_heads, heads_from_metadata) = match g.get(KEY_HEAD_COUNT) {
        Some(v) => (
            v.as_u64()
                .filter(|&h| h > 0)
                .ok_or_else(|| bad(format!("{KEY_HEAD_COUNT} is {v}, not a positive integer")))?
                as usize,
            true,
        ),
        None if dim.is_multiple_of(128) => (dim / 128, false),
        None => {
            return Err(bad(format!(
                "no {KEY_HEAD_COUNT} and dim {dim} is not a multiple of 128: the head count \
                 cannot be inferred"
            )))
        }
    };
    if !dim.is_multiple_of(num_heads) || !(dim / num_heads).is_multiple_of(2) {
        return Err(bad(format!(
            "{num_heads} heads do not split dim {dim} into even head sizes"
        )));
    }
    let eps = match g.get(KEY_EPS) {
        Some(v) => v
            .as_f64()
            .filter(|e| *e > 0.0)
            .ok_or_else(|| bad(format!("{KEY_EPS} is {v}, not a positive number")))?
            as f32,
        None => 1e-6,
    };
    let rope_max_seq_len = match g.get(KEY_ROPE_MAX) {
        Some(v) => v
            .as_u64()
            .filter(|&n| n > 0)
            .ok_or_else(|| bad(format!("{KEY_ROPE_MAX} is {v}, not a positive integer")))?
            as usize,
        None => 1024,
    };
    let image_dim = shape(g, "img_emb.proj.1.weight").map(|s| *s.last().unwrap_or(&0));
    let image_pos_len = shape(g, "img_emb.emb_pos").and_then(|s| s.get(1).copied());
    let config = WanDitConfig {
        patch_size,
        num_heads,
        head_dim: dim / num_heads,
        in_channels,
        out_channels,
        text_dim,
        freq_dim,
        ffn_dim,
        num_layers,
        cross_attn_norm: g.tensor("blocks.0.norm3.weight").is_some(),
        eps,
        rope_max_seq_len,
    };
    let info = WanDitInfo {
        config,
        image_dim,
        image_pos_len,
        heads_from_metadata,
    };
    check_tensors(g, &info, path)?;
    Ok(info)
}

/// Every tensor the config implies, with its PyTorch-order shape.
fn expected_tensors(info: &WanDitInfo) -> Vec<(String, Vec<usize>)> {
    let c = &info.config;
    let d = c.dim();
    let [pt, ph, pw] = c.patch_size;
    let mut t: Vec<(String, Vec<usize>)> = Vec::new();
    let mut linear = |name: &str, n_out: usize, n_in: usize| {
        t.push((format!("{name}.weight"), vec![n_out, n_in]));
        t.push((format!("{name}.bias"), vec![n_out]));
    };
    linear("text_embedding.0", d, c.text_dim);
    linear("text_embedding.2", d, d);
    linear("time_embedding.0", d, c.freq_dim);
    linear("time_embedding.2", d, d);
    linear("time_projection.1", 6 * d, d);
    linear("head.head", c.out_channels * pt * ph * pw, d);
    for n in 0..c.num_layers {
        for attn in ["self_attn", "cross_attn"] {
            for p in ["q", "k", "v", "o"] {
                linear(&format!("blocks.{n}.{attn}.{p}"), d, d);
            }
        }
        if info.image_dim.is_some() {
            linear(&format!("blocks.{n}.cross_attn.k_img"), d, d);
            linear(&format!("blocks.{n}.cross_attn.v_img"), d, d);
        }
        linear(&format!("blocks.{n}.ffn.0"), c.ffn_dim, d);
        linear(&format!("blocks.{n}.ffn.2"), d, c.ffn_dim);
    }
    if let Some(image_dim) = info.image_dim {
        linear("img_emb.proj.1", d, image_dim);
        linear("img_emb.proj.3", d, d);
    }
    let mut vector = |name: String, n: usize| t.push((name, vec![n]));
    vector("patch_embedding.bias".into(), d);
    for n in 0..c.num_layers {
        for attn in ["self_attn", "cross_attn"] {
            vector(format!("blocks.{n}.{attn}.norm_q.weight"), d);
            vector(format!("blocks.{n}.{attn}.norm_k.weight"), d);
        }
        if info.image_dim.is_some() {
            vector(format!("blocks.{n}.cross_attn.norm_k_img.weight"), d);
        }
        if c.cross_attn_norm {
            vector(format!("blocks.{n}.norm3.weight"), d);
            vector(format!("blocks.{n}.norm3.bias"), d);
        }
    }
    if let Some(image_dim) = info.image_dim {
        for p in ["weight", "bias"] {
            vector(format!("img_emb.proj.0.{p}"), image_dim);
            vector(format!("img_emb.proj.4.{p}"), d);
        }
    }
    t.push(("head.modulation".into(), vec![1, 2, d]));
    for n in 0..c.num_layers {
        t.push((format!("blocks.{n}.modulation"), vec![1, 6, d]));
    }
    if let (Some(len), Some(image_dim)) = (info.image_pos_len, info.image_dim) {
        t.push(("img_emb.emb_pos".into(), vec![1, len, image_dim]));
    }
    t
}

fn check_tensors(g: &Gguf, info: &WanDitInfo, path: &Path) -> Result<(), ModelFileError> {
    let bad = |message: String| ModelFileError::Weights {
        path: path.display().to_string(),
        message,
    };
    let expected = expected_tensors(info);
    for (name, want) in &expected {
        let got = shape(g, name).ok_or_else(|| bad(format!("tensor {name} is missing")))?;
        // Vectors may be stored [n] or [1, n]; matrices and the rest as PyTorch has them.
        let same = got == *want || (want.len() == 1 && got.iter().product::<usize>() == want[0]);
        if !same {
            return Err(bad(format!(
                "tensor {name} has shape {got:?}, the other tensors imply {want:?}"
            )));
        }
        if g.get(&format!("comfy.gguf.orig_shape.{name}")).is_some() {
            return Err(bad(format!(
                "tensor {name} was reshaped by its converter (comfy.gguf.orig_shape): \
                 not supported for Wan"
            )));
        }
    }
    let c = &info.config;
    let patch = shape(g, "patch_embedding.weight").unwrap_or_default();
    if patch.iter().product::<usize>()
        != c.dim() * c.in_channels * c.patch_size.iter().product::<usize>()
    {
        return Err(bad(format!(
            "tensor patch_embedding.weight has shape {patch:?}, inconsistent with dim {}",
            c.dim()
        )));
    }
    let known = expected.len() + 1; // + patch_embedding.weight
    if g.tensors.len() != known {
        let extra = g.tensors.iter().find(|t| {
            t.name != "patch_embedding.weight" && !expected.iter().any(|(n, _)| *n == t.name)
        });
        let what = extra.map_or_else(
            || "a tensor appears twice".to_string(),
            |t| match dit_diffusers_name(&t.name) {
                None => format!(
                    "tensor {} is not part of a Wan 2.1 / 2.2 DiT (VACE and other variants \
                     are not supported)",
                    t.name
                ),
                Some(_) => format!(
                    "tensor {} does not fit the rest ({} layers found)",
                    t.name, c.num_layers
                ),
            },
        );
        return Err(bad(what));
    }
    Ok(())
}

/// Opens a Wan DiT GGUF (memory-mapped, weights used in place) and reads its config. Tensor
/// names carrying ComfyUI's `model.diffusion_model.` prefix lose it.
pub fn open_dit(path: &Path) -> Result<(ModelFile, WanDitInfo), ModelFileError> {
    let io = |e: std::io::Error| ModelFileError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: read-only map, as in gguf::ModelFile::open.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    let mut g = parse_header(&map, map.len() as u64).map_err(|e| ModelFileError::Weights {
        path: path.display().to_string(),
        message: format!("not a GGUF file: {e}"),
    })?;
    if g.tensors.iter().any(|t| t.name.starts_with(COMFY_PREFIX)) {
        let tensors = g
            .tensors
            .iter()
            .filter_map(|t| {
                let name = t.name.strip_prefix(COMFY_PREFIX)?.to_string();
                Some(crate::gguf::TensorInfo { name, ..t.clone() })
            })
            .collect();
        let mut renamed = Gguf::from_parts(
            std::mem::take(&mut g.metadata),
            tensors,
            g.data_offset,
            g.file_len,
        );
        renamed.version = g.version;
        renamed.alignment = g.alignment;
        g = renamed;
    }
    let info = dit_info(&g, path)?;
    Ok((ModelFile::from_header(g, ModelBytes::Mapped(map)), info))
}

/// A Wan DiT from either source: a GGUF file ([`open_dit`]) or a diffusers `transformer/`
/// folder seen under the GGUF names ([`super::wan_names::open_diffusers_dit`], no copy),
/// with its config read the same way from both.
pub fn open_dit_any(path: &Path) -> Result<(ModelFile, WanDitInfo), ModelFileError> {
    if path.is_dir() {
        let file = super::wan_names::open_diffusers_dit(path)?;
        let info = dit_info(&file.gguf, path)?;
        Ok((file, info))
    } else {
        open_dit(path)
    }
}
