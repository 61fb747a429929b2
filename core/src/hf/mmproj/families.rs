//! Per family: which Hugging Face tensors belong to the vision tower and projector, their
//! names in llama.cpp's `mmproj` GGUF, what happens to their values, which ones keep a forced
//! type, and the family's `clip.*` keys — as llama.cpp's `convert_hf_to_gguf.py --mmproj`
//! (its `SmolVLMModel`, `Qwen2VLVisionModel` and `Gemma3VisionModel`) writes them.

use serde_json::Value as Json;

use crate::dtype::GgmlType;
use crate::gguf::Value;

/// The vision families the converter knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VisionFamily {
    /// `Idefics3ForConditionalGeneration` / `SmolVLMForConditionalGeneration`.
    Idefics3,
    /// `Qwen2_5_VLForConditionalGeneration`.
    Qwen25VL,
    /// `Gemma3ForConditionalGeneration`.
    Gemma3,
}

impl VisionFamily {
    /// The family of a `config.json`, by its architectures (else its `model_type`).
    pub fn from_config(config: &Json) -> Option<Self> {
        let archs = config["architectures"].as_array().into_iter().flatten();
        let by_arch = archs.filter_map(|a| a.as_str()).find_map(|a| match a {
            "Idefics3ForConditionalGeneration" | "SmolVLMForConditionalGeneration" => {
                Some(VisionFamily::Idefics3)
            }
            "Qwen2_5_VLForConditionalGeneration" => Some(VisionFamily::Qwen25VL),
            "Gemma3ForConditionalGeneration" => Some(VisionFamily::Gemma3),
            _ => None,
        });
        by_arch.or(match config["model_type"].as_str()? {
            "idefics3" | "smolvlm" => Some(VisionFamily::Idefics3),
            "qwen2_5_vl" => Some(VisionFamily::Qwen25VL),
            "gemma3" if config.get("vision_config").is_some() => Some(VisionFamily::Gemma3),
            _ => None,
        })
    }
}

/// What happens to a tensor's values besides the name change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    None,
    /// Rows `part * n / 3 ..` of a fused q/k/v weight or bias (Qwen2.5-VL's `attn.qkv`).
    ThirdOfRows(usize),
    /// Temporal slice `t` of Qwen2.5-VL's Conv3D patch embedding `[out, in, 2, h, w]`: two
    /// Conv2D kernels `v.patch_embd.weight` and `v.patch_embd.weight.1`.
    TimeSlice(usize),
    /// Gemma's RMSNorm `1 + w` stored as `w + 1` (`mm.soft_emb_norm.weight` only: SigLIP's
    /// norms are ordinary LayerNorms).
    AddOne,
}

/// One output tensor made from a Hugging Face tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Mapped {
    pub name: String,
    pub op: Op,
}

fn one(name: String) -> Vec<Mapped> {
    vec![Mapped { name, op: Op::None }]
}

/// SigLIP's names (Idefics3's and Gemma 3's towers) after the tower's prefix.
fn siglip(rest: &str) -> Option<Vec<Mapped>> {
    let fixed = match rest {
        "embeddings.patch_embedding.weight" => Some("v.patch_embd.weight"),
        "embeddings.patch_embedding.bias" => Some("v.patch_embd.bias"),
        "embeddings.position_embedding.weight" => Some("v.position_embd.weight"),
        "post_layernorm.weight" => Some("v.post_ln.weight"),
        "post_layernorm.bias" => Some("v.post_ln.bias"),
        _ => None,
    };
    if let Some(f) = fixed {
        return Some(one(f.into()));
    }
    let (layer, module, kind) = block(rest.strip_prefix("encoder.layers.")?)?;
    let g = match module {
        "layer_norm1" => "ln1",
        "layer_norm2" => "ln2",
        "mlp.fc1" => "ffn_up",
        "mlp.fc2" => "ffn_down",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.out_proj" => "attn_out",
        _ => return None,
    };
    Some(one(format!("v.blk.{layer}.{g}.{kind}")))
}

/// `N.module.kind` of a block's tensor.
fn block(rest: &str) -> Option<(usize, &str, &str)> {
    let (layer, part) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, kind) = part.rsplit_once('.')?;
    matches!(kind, "weight" | "bias").then_some((layer, module, kind))
}

fn qwen25vl(rest: &str) -> Option<Vec<Mapped>> {
    match rest {
        "patch_embed.proj.weight" => {
            return Some(
                (0..2)
                    .map(|t| Mapped {
                        name: if t == 0 {
                            "v.patch_embd.weight".into()
                        } else {
                            "v.patch_embd.weight.1".into()
                        },
                        op: Op::TimeSlice(t),
                    })
                    .collect(),
            )
        }
        "merger.ln_q.weight" => return Some(one("v.post_ln.weight".into())),
        "merger.ln_q.bias" => return Some(one("v.post_ln.bias".into())),
        _ => {}
    }
    if let Some(m) = rest.strip_prefix("merger.mlp.") {
        let (i, kind) = m.split_once('.')?;
        let i: usize = i.parse().ok()?;
        return matches!(kind, "weight" | "bias").then(|| one(format!("mm.{i}.{kind}")));
    }
    let (layer, module, kind) = block(rest.strip_prefix("blocks.")?)?;
    if module == "attn.qkv" {
        return Some(
            ["attn_q", "attn_k", "attn_v"]
                .iter()
                .enumerate()
                .map(|(i, g)| Mapped {
                    name: format!("v.blk.{layer}.{g}.{kind}"),
                    op: Op::ThirdOfRows(i),
                })
                .collect(),
        );
    }
    let g = match module {
        "attn.proj" => "attn_out",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        "norm1" => "ln1",
        "norm2" => "ln2",
        _ => return None,
    };
    Some(one(format!("v.blk.{layer}.{g}.{kind}")))
}

/// The output tensors made from the Hugging Face tensor `hf`, or None for one that is not part
/// of the vision tower or projector (the text model, Gemma 3's unused `vision_model.head.`).
pub fn map(family: VisionFamily, hf: &str) -> Option<Vec<Mapped>> {
    match family {
        VisionFamily::Idefics3 => {
            if hf == "model.connector.modality_projection.proj.weight" {
                return Some(one("mm.model.fc.weight".into()));
            }
            siglip(hf.strip_prefix("model.vision_model.")?)
        }
        VisionFamily::Qwen25VL => qwen25vl(hf.strip_prefix("visual.")?),
        VisionFamily::Gemma3 => {
            let rest = hf
                .strip_prefix("vision_tower.vision_model.")
                .or_else(|| hf.strip_prefix("vision_model."));
            if let Some(rest) = rest {
                return siglip(rest);
            }
            let p = hf
                .strip_prefix("multi_modal_projector.")
                .or_else(|| hf.strip_prefix("multimodal_projector."))?;
            match p {
                "mm_input_projection_weight" | "mm_input_projection.weight" => {
                    Some(one("mm.input_projection.weight".into()))
                }
                "mm_soft_emb_norm.weight" => Some(vec![Mapped {
                    name: "mm.soft_emb_norm.weight".into(),
                    op: Op::AddOne,
                }]),
                _ => None,
            }
        }
    }
}

/// The stored type of output tensor `name` (made from `hf`, `n_dims` dimensions) for the
/// output type `out` (F32, F16 or BF16), by the converter's rules in its order: the family's
/// forced types, then vectors and norms F32, position embeddings and non-`.weight` tensors
/// F32, the rest `out`.
pub fn tensor_type(
    family: VisionFamily,
    hf: &str,
    name: &str,
    n_dims: usize,
    out: GgmlType,
) -> GgmlType {
    let forced = match family {
        VisionFamily::Gemma3 if hf.contains("input_projection") => Some(GgmlType::F16),
        VisionFamily::Gemma3 | VisionFamily::Idefics3 if hf.contains(".embeddings.") => {
            Some(GgmlType::F32)
        }
        VisionFamily::Qwen25VL if name.contains(".position_embd.") => Some(GgmlType::F32),
        _ => None,
    };
    // MmprojModel: patch embeddings are F16 in an F16 file, else F32.
    let forced = forced.or_else(|| {
        name.contains(".patch_embd.weight")
            .then_some(if out == GgmlType::F16 {
                GgmlType::F16
            } else {
                GgmlType::F32
            })
    });
    if n_dims <= 1 || name.ends_with("_norm.weight") {
        return GgmlType::F32;
    }
    if let Some(t) = forced {
        return t;
    }
    if name.starts_with("v.position_embd.") || !name.ends_with(".weight") {
        return GgmlType::F32;
    }
    out
}

fn get<'a>(obj: &'a Json, keys: &[&str]) -> Option<&'a Json> {
    keys.iter().find_map(|k| obj.get(*k))
}

fn u32_of(obj: &Json, keys: &[&str], what: &str) -> Result<u32, String> {
    get(obj, keys)
        .and_then(Json::as_u64)
        .map(|v| v as u32)
        .ok_or_else(|| format!("vision_config has no {what} ({})", keys.join(" / ")))
}

fn f32_array(obj: &Json, key: &str) -> Result<Value, String> {
    let a = obj[key]
        .as_array()
        .filter(|a| !a.is_empty() && a.iter().all(Json::is_number))
        .ok_or_else(|| format!("the preprocessor config has no {key} list"))?;
    Ok(Value::Array(
        a.iter()
            .map(|v| Value::F32(v.as_f64().unwrap_or(0.0) as f32))
            .collect(),
    ))
}

/// The `clip.*` keys (after `general.file_type`) of `family`, from `config.json` and the
/// merged `preprocessor_config.json` / `processor_config.json` (`pre`).
pub fn clip_metadata(
    family: VisionFamily,
    config: &Json,
    pre: &Json,
) -> Result<Vec<(String, Value)>, String> {
    let v = &config["vision_config"];
    if !v.is_object() {
        return Err("config.json has no vision_config".into());
    }
    // The text width: text_config over the top level, as MmprojModel merges them.
    let n_embd_text = config["text_config"]
        .get("hidden_size")
        .or_else(|| config.get("hidden_size"))
        .and_then(Json::as_u64)
        .ok_or("config.json gives no text hidden_size")? as u32;
    let image_size = match family {
        VisionFamily::Qwen25VL => v["image_size"].as_u64().unwrap_or(560) as u32,
        _ => u32_of(v, &["image_size"], "image_size")?,
    };
    let k = |s: &str| s.to_string();
    let mut m = vec![
        (k("clip.has_vision_encoder"), Value::Bool(true)),
        (k("clip.vision.projection_dim"), Value::U32(n_embd_text)),
        (k("clip.vision.image_size"), Value::U32(image_size)),
        (
            k("clip.vision.patch_size"),
            Value::U32(u32_of(v, &["patch_size"], "patch_size")?),
        ),
        (
            k("clip.vision.embedding_length"),
            Value::U32(u32_of(v, &["hidden_size", "width"], "width")?),
        ),
        (
            k("clip.vision.feed_forward_length"),
            Value::U32(u32_of(v, &["intermediate_size"], "intermediate_size")?),
        ),
        (
            k("clip.vision.block_count"),
            Value::U32(u32_of(
                v,
                &["num_hidden_layers", "depth", "n_layers", "num_layers"],
                "layer count",
            )?),
        ),
        (
            k("clip.vision.attention.head_count"),
            Value::U32(u32_of(
                v,
                &["num_attention_heads", "num_heads"],
                "head count",
            )?),
        ),
        (k("clip.vision.image_mean"), f32_array(pre, "image_mean")?),
        (k("clip.vision.image_std"), f32_array(pre, "image_std")?),
    ];
    let eps = |default: f64| Value::F32(v["layer_norm_eps"].as_f64().unwrap_or(default) as f32);
    match family {
        VisionFamily::Idefics3 => {
            m.push((k("clip.projector_type"), Value::String("idefics3".into())));
            m.push((k("clip.vision.attention.layer_norm_epsilon"), eps(1e-5)));
            let scale = config["scale_factor"].as_u64().unwrap_or(2) as u32;
            m.push((k("clip.vision.projector.scale_factor"), Value::U32(scale)));
            m.push((k("clip.use_gelu"), Value::Bool(true)));
            let longest = pre["size"]["longest_edge"]
                .as_u64()
                .map_or(image_size, |x| x as u32);
            m.push((k("clip.vision.preproc_image_size"), Value::U32(longest)));
        }
        VisionFamily::Qwen25VL => {
            m.push((
                k("clip.projector_type"),
                Value::String("qwen2.5vl_merger".into()),
            ));
            m.push((k("clip.use_silu"), Value::Bool(true)));
            let full: Vec<u64> = v["fullatt_block_indexes"]
                .as_array()
                .ok_or("vision_config has no fullatt_block_indexes (needed for Qwen2.5-VL)")?
                .iter()
                .filter_map(Json::as_u64)
                .collect();
            let pattern = full.first().ok_or("fullatt_block_indexes is empty")? + 1;
            if full
                .windows(2)
                .any(|w| w[1].checked_sub(w[0]) != Some(pattern))
            {
                return Err(format!(
                    "fullatt_block_indexes {full:?} are not evenly spaced (every {pattern}th)"
                ));
            }
            m.push((k("clip.vision.n_wa_pattern"), Value::U32(pattern as u32)));
            let e = config["rms_norm_eps"].as_f64().unwrap_or(1e-6) as f32;
            m.push((k("clip.vision.attention.layer_norm_epsilon"), Value::F32(e)));
        }
        VisionFamily::Gemma3 => {
            m.push((k("clip.projector_type"), Value::String("gemma3".into())));
            m.push((k("clip.vision.attention.layer_norm_epsilon"), eps(1e-6)));
            m.push((k("clip.use_gelu"), Value::Bool(true)));
            // Written only when not the default 4 (llama.cpp's tiny test models).
            let seq = pre["image_seq_length"].as_u64().unwrap_or(256) as f64;
            let per_side = seq.sqrt() as u32;
            let patch = u32_of(v, &["patch_size"], "patch_size")?;
            if per_side > 0 && patch > 0 {
                let scale = (image_size / patch) / per_side;
                if scale > 0 && scale != 4 {
                    m.push((k("clip.vision.projector.scale_factor"), Value::U32(scale)));
                }
            }
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_llama_cpp() {
        let n = |f, h| map(f, h).map(|v| v.into_iter().map(|m| m.name).collect::<Vec<_>>());
        assert_eq!(
            n(
                VisionFamily::Idefics3,
                "model.vision_model.encoder.layers.1.self_attn.out_proj.bias"
            ),
            Some(vec!["v.blk.1.attn_out.bias".to_string()])
        );
        assert_eq!(
            n(VisionFamily::Idefics3, "model.text_model.norm.weight"),
            None
        );
        assert_eq!(
            n(VisionFamily::Qwen25VL, "visual.blocks.3.attn.qkv.weight"),
            Some(vec![
                "v.blk.3.attn_q.weight".to_string(),
                "v.blk.3.attn_k.weight".into(),
                "v.blk.3.attn_v.weight".into()
            ])
        );
        assert_eq!(
            n(
                VisionFamily::Gemma3,
                "multi_modal_projector.mm_input_projection_weight"
            ),
            Some(vec!["mm.input_projection.weight".to_string()])
        );
        assert_eq!(
            n(
                VisionFamily::Gemma3,
                "vision_tower.vision_model.head.mlp.fc1.weight"
            ),
            None
        );
    }

    #[test]
    fn types_follow_llama_cpp() {
        use GgmlType::{F16, F32};
        let t = |f, hf, name, d, out| tensor_type(f, hf, name, d, out);
        let i = VisionFamily::Idefics3;
        let pe = "model.vision_model.embeddings.patch_embedding.weight";
        assert_eq!(t(i, pe, "v.patch_embd.weight", 4, F16), F32);
        assert_eq!(t(i, "x", "v.blk.0.attn_q.weight", 2, F16), F16);
        assert_eq!(t(i, "x", "v.blk.0.attn_q.bias", 1, F16), F32);
        let q = VisionFamily::Qwen25VL;
        assert_eq!(t(q, "x", "v.patch_embd.weight.1", 4, F16), F16);
        assert_eq!(t(q, "x", "v.patch_embd.weight.1", 4, F32), F32);
        let g = VisionFamily::Gemma3;
        let ip = "multi_modal_projector.mm_input_projection_weight";
        assert_eq!(t(g, ip, "mm.input_projection.weight", 2, F32), F16);
    }
}
