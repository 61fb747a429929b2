//! `model.safetensors` memory-mapped and described as a GGUF header: every tensor under its
//! llama.cpp name, pointing at its bytes in the map, so the backends and the BERT family load
//! it exactly as they load a GGUF file (weights used in place).

use std::path::Path;

use ::safetensors::{Dtype, SafeTensorError, SafeTensors};

use super::HfError;
use crate::dtype::GgmlType;
use crate::gguf::{Gguf, ModelBytes, ModelFile, TensorInfo, Value};

/// The llama.cpp (GGUF) name of a Hugging Face BERT tensor, or None for tensors the encoder
/// does not use (`position_ids`, the pooler).
pub fn gguf_name(hf: &str) -> Option<String> {
    let name = hf.strip_prefix("bert.").unwrap_or(hf);
    // Old checkpoints name LayerNorm parameters gamma/beta.
    let name = name.replace("LayerNorm.gamma", "LayerNorm.weight");
    let name = name.replace("LayerNorm.beta", "LayerNorm.bias");
    let fixed = match name.as_str() {
        "embeddings.word_embeddings.weight" => Some("token_embd.weight"),
        "embeddings.position_embeddings.weight" => Some("position_embd.weight"),
        "embeddings.token_type_embeddings.weight" => Some("token_types.weight"),
        "embeddings.LayerNorm.weight" => Some("token_embd_norm.weight"),
        "embeddings.LayerNorm.bias" => Some("token_embd_norm.bias"),
        _ => None,
    };
    if let Some(f) = fixed {
        return Some(f.to_string());
    }
    let rest = name.strip_prefix("encoder.layer.")?;
    let (layer, part) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, kind) = part.rsplit_once('.')?;
    let gguf = match module {
        "attention.self.query" => "attn_q",
        "attention.self.key" => "attn_k",
        "attention.self.value" => "attn_v",
        "attention.output.dense" => "attn_output",
        "attention.output.LayerNorm" => "attn_output_norm",
        "intermediate.dense" => "ffn_up",
        "output.dense" => "ffn_down",
        "output.LayerNorm" => "layer_output_norm",
        _ => return None,
    };
    matches!(kind, "weight" | "bias").then(|| format!("blk.{layer}.{gguf}.{kind}"))
}

fn ggml_type(d: Dtype) -> Option<GgmlType> {
    match d {
        Dtype::F32 => Some(GgmlType::F32),
        Dtype::F16 => Some(GgmlType::F16),
        Dtype::BF16 => Some(GgmlType::BF16),
        _ => None,
    }
}

/// Maps `path` and describes its BERT tensors under GGUF names, with `metadata` as the
/// header's key/value pairs.
pub fn open(path: &Path, metadata: Vec<(String, Value)>) -> Result<ModelFile, HfError> {
    map_renamed(path, &mut |hf| gguf_name(hf), metadata)
}

/// Maps the safetensors file `path` and describes it as a GGUF header: each tensor under the
/// name `rename` gives it (tensors it gives None are left out), pointing at its bytes in the
/// map (F32, F16 and BF16 only, used in place), with `metadata` as the key/value pairs. Every
/// converter of a safetensors layout to a GGUF one (BERT here, Wan's diffusers folders in
/// `diffusion::wan_names`) shares this.
pub(crate) fn map_renamed(
    path: &Path,
    rename: &mut dyn FnMut(&str) -> Option<String>,
    metadata: Vec<(String, Value)>,
) -> Result<ModelFile, HfError> {
    let file = std::fs::File::open(path).map_err(|e| HfError::io(path, e))?;
    // SAFETY: read-only map; as with GGUF files, a file truncated underneath us by another
    // process is outside what a reader can defend against.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| HfError::io(path, e))?;
    let bad = |message: String| HfError::Safetensors {
        path: path.display().to_string(),
        message,
    };
    let (header_len, meta) = SafeTensors::read_metadata(&map).map_err(|e| {
        let hint = match e {
            SafeTensorError::MetadataIncompleteBuffer | SafeTensorError::InvalidHeaderLength => {
                " (the file looks truncated: download it again)"
            }
            _ => "",
        };
        bad(format!("{e}{hint}"))
    })?;
    let data_start = 8 + header_len as u64;
    let infos = meta.tensors();
    let mut tensors = Vec::new();
    for hf_name in meta.offset_keys() {
        let Some(name) = rename(&hf_name) else {
            continue;
        };
        let info = infos[&hf_name];
        let ty = ggml_type(info.dtype).ok_or_else(|| {
            bad(format!(
                "tensor {hf_name} is {:?}; only F32, F16 and BF16 are supported",
                info.dtype
            ))
        })?;
        let (start, end) = info.data_offsets;
        let offset = data_start + start as u64;
        if !offset.is_multiple_of(ty.type_size() as u64) {
            return Err(bad(format!(
                "tensor {hf_name} is not aligned to its element size"
            )));
        }
        // GGUF dims are innermost first.
        let dims: Vec<u64> = info.shape.iter().rev().map(|&d| d as u64).collect();
        let n_elements: u64 = dims.iter().product();
        tensors.push(TensorInfo {
            name,
            dims: if dims.is_empty() { vec![1] } else { dims },
            ty,
            offset,
            n_elements,
            n_bytes: (end - start) as u64,
        });
    }
    let len = map.len() as u64;
    let gguf = Gguf::from_parts(metadata, tensors, 0, len);
    Ok(ModelFile::from_header(gguf, ModelBytes::Mapped(map)))
}

#[cfg(test)]
mod tests {
    use super::gguf_name;

    #[test]
    fn names_follow_llama_cpp() {
        let cases = [
            (
                "embeddings.word_embeddings.weight",
                Some("token_embd.weight"),
            ),
            (
                "bert.embeddings.LayerNorm.gamma",
                Some("token_embd_norm.weight"),
            ),
            (
                "encoder.layer.3.attention.self.key.bias",
                Some("blk.3.attn_k.bias"),
            ),
            (
                "encoder.layer.0.attention.output.LayerNorm.weight",
                Some("blk.0.attn_output_norm.weight"),
            ),
            (
                "encoder.layer.5.output.dense.weight",
                Some("blk.5.ffn_down.weight"),
            ),
            (
                "encoder.layer.5.output.LayerNorm.bias",
                Some("blk.5.layer_output_norm.bias"),
            ),
            ("embeddings.position_ids", None),
            ("pooler.dense.weight", None),
        ];
        for (hf, want) in cases {
            assert_eq!(gguf_name(hf).as_deref(), want, "{hf}");
        }
    }
}
