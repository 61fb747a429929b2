//! The one map between the two names of every Wan DiT tensor: diffusers'
//! (`WanTransformer3DModel`, the `transformer/` folder of a diffusers pipeline) and the GGUF
//! one, which is Wan's own (`wan/modules/model.py` of the Wan2.1 / Wan2.2 repositories) as
//! city96's ComfyUI-GGUF files, ComfyUI and stable-diffusion.cpp carry it. The runtime reads
//! DiT weights by GGUF name only; a diffusers folder is seen through [`open_diffusers_dit`], a
//! zero-copy `ModelFile` whose tensors carry the GGUF names.
//!
//! Checked against diffusers' own Wan converters (`scripts/convert_wan_to_diffusers.py`,
//! `loaders/single_file_utils.py::convert_wan_transformer_to_diffusers`), ComfyUI's Wan
//! detection and stable-diffusion.cpp's `wan.hpp`. Two things the names alone do not say:
//! Wan's `norm3` (the affine LayerNorm before cross-attention) is diffusers' `norm2` (Wan's
//! `norm2`, before the FFN, has no parameters), and the shapes are the same under both names
//! (`patch_embedding.weight` stays 5-D `[dim, in, pt, ph, pw]`, the modulations stay
//! `[1, 6, dim]` / `[1, 2, dim]`).

use std::path::Path;

use super::files::{read_config, ModelFileError};
use crate::gguf::{ModelFile, Value};
use crate::hf::map_renamed;

/// `general.architecture` of a Wan DiT GGUF (city96's files and ours).
pub const ARCH: &str = "wan";
/// Head count: not in any tensor's shape. city96's files do not carry it (ComfyUI and
/// stable-diffusion.cpp take `dim / 128`, true of every released Wan); ours do.
pub const KEY_HEAD_COUNT: &str = "wan.attention.head_count";
/// The LayerNorm / RMSNorm epsilon (1e-6 in every released Wan, the default when absent).
pub const KEY_EPS: &str = "wan.attention.layer_norm_epsilon";
/// diffusers' `rope_max_seq_len` (1024, the default when absent).
pub const KEY_ROPE_MAX: &str = "wan.rope_max_seq_len";
/// The prefix ComfyUI checkpoints put before every DiT tensor; readers strip it.
pub const COMFY_PREFIX: &str = "model.diffusion_model.";

/// Top-level modules whose `.weight` / `.bias` follow: (diffusers, GGUF).
const TOP: &[(&str, &str)] = &[
    ("patch_embedding", "patch_embedding"),
    (
        "condition_embedder.text_embedder.linear_1",
        "text_embedding.0",
    ),
    (
        "condition_embedder.text_embedder.linear_2",
        "text_embedding.2",
    ),
    (
        "condition_embedder.time_embedder.linear_1",
        "time_embedding.0",
    ),
    (
        "condition_embedder.time_embedder.linear_2",
        "time_embedding.2",
    ),
    ("condition_embedder.time_proj", "time_projection.1"),
    ("proj_out", "head.head"),
    // Wan 2.1 I2V / FLF2V: the CLIP image-feature projection.
    ("condition_embedder.image_embedder.norm1", "img_emb.proj.0"),
    (
        "condition_embedder.image_embedder.ff.net.0.proj",
        "img_emb.proj.1",
    ),
    (
        "condition_embedder.image_embedder.ff.net.2",
        "img_emb.proj.3",
    ),
    ("condition_embedder.image_embedder.norm2", "img_emb.proj.4"),
];

/// Top-level bare parameters (whole names).
const TOP_PARAMS: &[(&str, &str)] = &[
    ("scale_shift_table", "head.modulation"),
    // Wan 2.1 FLF2V's learned positions of the two images' tokens.
    (
        "condition_embedder.image_embedder.pos_embed",
        "img_emb.emb_pos",
    ),
];

/// Modules of block N (`blocks.N.` before both names), `.weight` / `.bias` after.
const BLOCK: &[(&str, &str)] = &[
    ("attn1.to_q", "self_attn.q"),
    ("attn1.to_k", "self_attn.k"),
    ("attn1.to_v", "self_attn.v"),
    ("attn1.to_out.0", "self_attn.o"),
    ("attn1.norm_q", "self_attn.norm_q"),
    ("attn1.norm_k", "self_attn.norm_k"),
    ("attn2.to_q", "cross_attn.q"),
    ("attn2.to_k", "cross_attn.k"),
    ("attn2.to_v", "cross_attn.v"),
    ("attn2.to_out.0", "cross_attn.o"),
    ("attn2.norm_q", "cross_attn.norm_q"),
    ("attn2.norm_k", "cross_attn.norm_k"),
    // Wan 2.1 I2V: keys / values over the image tokens.
    ("attn2.add_k_proj", "cross_attn.k_img"),
    ("attn2.add_v_proj", "cross_attn.v_img"),
    ("attn2.norm_added_k", "cross_attn.norm_k_img"),
    // The swap: diffusers' norm2 is Wan's norm3 (see the module docs).
    ("norm2", "norm3"),
    ("ffn.net.0.proj", "ffn.0"),
    ("ffn.net.2", "ffn.2"),
];

/// Bare parameters of block N.
const BLOCK_PARAMS: &[(&str, &str)] = &[("scale_shift_table", "modulation")];

/// Which way a name goes through the tables.
#[derive(Clone, Copy)]
enum Way {
    ToGguf,
    ToDiffusers,
}

fn lookup<'a>(table: &'a [(&'a str, &'a str)], name: &str, way: Way) -> Option<&'a str> {
    table.iter().find_map(|&(d, g)| match way {
        Way::ToGguf => (d == name).then_some(g),
        Way::ToDiffusers => (g == name).then_some(d),
    })
}

/// A module name plus its `.weight` / `.bias` through `table`.
fn module_param(table: &[(&str, &str)], name: &str, way: Way) -> Option<String> {
    let (module, param) = name.rsplit_once('.')?;
    if !matches!(param, "weight" | "bias") {
        return None;
    }
    Some(format!("{}.{param}", lookup(table, module, way)?))
}

fn convert(name: &str, way: Way) -> Option<String> {
    if let Some(rest) = name.strip_prefix("blocks.") {
        let (n, part) = rest.split_once('.')?;
        let n: usize = n.parse().ok()?;
        let part = lookup(BLOCK_PARAMS, part, way)
            .map(str::to_string)
            .or_else(|| module_param(BLOCK, part, way))?;
        return Some(format!("blocks.{n}.{part}"));
    }
    lookup(TOP_PARAMS, name, way)
        .map(str::to_string)
        .or_else(|| module_param(TOP, name, way))
}

/// The GGUF (Wan-original) name of a diffusers `WanTransformer3DModel` tensor; None for a
/// name that is not part of a Wan 2.1 / 2.2 DiT.
pub fn dit_gguf_name(diffusers: &str) -> Option<String> {
    convert(diffusers, Way::ToGguf)
}

/// The diffusers name of a GGUF DiT tensor (a leading [`COMFY_PREFIX`] is ignored); None for
/// a name that is not part of a Wan 2.1 / 2.2 DiT.
pub fn dit_diffusers_name(gguf: &str) -> Option<String> {
    convert(
        gguf.strip_prefix(COMFY_PREFIX).unwrap_or(gguf),
        Way::ToDiffusers,
    )
}

/// The GGUF name of tensor `part` (a GGUF name below `blocks.N.`, e.g. `self_attn.q.weight`)
/// of block `layer`.
pub fn block_tensor(layer: usize, part: &str) -> String {
    format!("blocks.{layer}.{part}")
}

/// The GGUF metadata that a diffusers `transformer/config.json` gives a Wan DiT file: the
/// architecture and what the tensor shapes do not say (see [`KEY_HEAD_COUNT`]).
pub fn dit_metadata(
    config_path: &Path,
    name: &str,
) -> Result<Vec<(String, Value)>, ModelFileError> {
    let bad = |message: String| ModelFileError::Config {
        path: config_path.display().to_string(),
        message,
    };
    let v = read_config(config_path)?;
    let class = v["_class_name"].as_str().unwrap_or("");
    if class != "WanTransformer3DModel" {
        return Err(bad(format!(
            "_class_name {class:?} is not WanTransformer3DModel (a Wan 2.1 / 2.2 DiT)"
        )));
    }
    let heads = v["num_attention_heads"]
        .as_u64()
        .filter(|&n| n > 0 && n <= u32::MAX as u64)
        .ok_or_else(|| bad("num_attention_heads must be a positive integer".into()))?;
    let eps = v["eps"].as_f64().unwrap_or(1e-6);
    let rope_max = match &v["rope_max_seq_len"] {
        serde_json::Value::Null => 1024,
        r => r
            .as_u64()
            .filter(|&n| n > 0 && n <= u32::MAX as u64)
            .ok_or_else(|| bad("rope_max_seq_len must be a positive integer".into()))?,
    };
    Ok(vec![
        ("general.architecture".into(), Value::String(ARCH.into())),
        ("general.name".into(), Value::String(name.into())),
        (KEY_HEAD_COUNT.into(), Value::U32(heads as u32)),
        (KEY_EPS.into(), Value::F32(eps as f32)),
        (KEY_ROPE_MAX.into(), Value::U32(rope_max as u32)),
    ])
}

/// The weights file of a diffusers component folder, or why there is no single one.
pub(super) fn single_weights_file(
    dir: &Path,
    stem: &str,
) -> Result<std::path::PathBuf, ModelFileError> {
    let index = dir.join(format!("{stem}.safetensors.index.json"));
    if index.is_file() {
        return Err(ModelFileError::Weights {
            path: index.display().to_string(),
            message: "the weights are sharded: a zero-copy view needs one file \
                      (run `weft convert` on the pipeline folder and load the GGUF)"
                .into(),
        });
    }
    let path = dir.join(format!("{stem}.safetensors"));
    if !path.is_file() {
        return Err(ModelFileError::Io {
            path: path.display().to_string(),
            message: "not found".into(),
        });
    }
    Ok(path)
}

/// A diffusers `transformer/` folder (config.json + diffusion_pytorch_model.safetensors) as a
/// Wan DiT `ModelFile`: the safetensors file memory-mapped, every tensor under its GGUF name
/// and in its stored type (F32 / F16 / BF16), the metadata of [`dit_metadata`]. A tensor the
/// map does not know is an error naming it (a VACE or other variant is not silently cut).
pub fn open_diffusers_dit(dir: &Path) -> Result<ModelFile, ModelFileError> {
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|d| {
            let parent = d.parent()?.file_name()?.to_string_lossy().into_owned();
            Some(format!("{parent}/{}", d.file_name()?.to_string_lossy()))
        })
        .unwrap_or_else(|| "wan".into());
    let metadata = dit_metadata(&dir.join("config.json"), &name)?;
    let path = single_weights_file(dir, "diffusion_pytorch_model")?;
    let mut unknown = Vec::new();
    let file = map_renamed(
        &path,
        &mut |n| {
            let g = dit_gguf_name(n);
            if g.is_none() {
                unknown.push(n.to_string());
            }
            g
        },
        metadata,
    )
    .map_err(|e| ModelFileError::Weights {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    if let Some(first) = unknown.first() {
        return Err(ModelFileError::Weights {
            path: path.display().to_string(),
            message: format!(
                "tensor {first} is not part of a Wan 2.1 / 2.2 DiT ({} unknown tensor(s))",
                unknown.len()
            ),
        });
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_go_both_ways() {
        let cases = [
            ("patch_embedding.weight", "patch_embedding.weight"),
            (
                "condition_embedder.text_embedder.linear_2.bias",
                "text_embedding.2.bias",
            ),
            (
                "condition_embedder.time_embedder.linear_1.weight",
                "time_embedding.0.weight",
            ),
            (
                "condition_embedder.time_proj.weight",
                "time_projection.1.weight",
            ),
            (
                "blocks.11.attn1.to_out.0.bias",
                "blocks.11.self_attn.o.bias",
            ),
            (
                "blocks.0.attn2.norm_k.weight",
                "blocks.0.cross_attn.norm_k.weight",
            ),
            (
                "blocks.3.attn2.add_v_proj.weight",
                "blocks.3.cross_attn.v_img.weight",
            ),
            (
                "blocks.3.attn2.norm_added_k.weight",
                "blocks.3.cross_attn.norm_k_img.weight",
            ),
            ("blocks.2.norm2.bias", "blocks.2.norm3.bias"),
            ("blocks.2.ffn.net.0.proj.weight", "blocks.2.ffn.0.weight"),
            ("blocks.2.scale_shift_table", "blocks.2.modulation"),
            ("scale_shift_table", "head.modulation"),
            ("proj_out.weight", "head.head.weight"),
            (
                "condition_embedder.image_embedder.ff.net.2.weight",
                "img_emb.proj.3.weight",
            ),
        ];
        for (d, g) in cases {
            assert_eq!(dit_gguf_name(d).as_deref(), Some(g), "{d}");
            assert_eq!(dit_diffusers_name(g).as_deref(), Some(d), "{g}");
        }
        assert_eq!(
            dit_diffusers_name("model.diffusion_model.blocks.0.norm3.weight").as_deref(),
            Some("blocks.0.norm2.weight")
        );
    }

    #[test]
    fn unknown_names_have_no_counterpart() {
        for n in [
            "blocks.0.norm3.weight", // a GGUF name is not a diffusers one
            "blocks.x.attn1.to_q.weight",
            "vace_blocks.0.attn1.to_q.weight",
            "blocks.0.attn1.to_q.scale",
            "scale_shift_table.weight",
            "",
        ] {
            assert_eq!(dit_gguf_name(n), None, "{n}");
        }
        assert_eq!(dit_diffusers_name("blocks.0.norm2.weight"), None);
        assert_eq!(dit_diffusers_name("head.norm.weight"), None);
    }
}
