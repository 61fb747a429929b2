//! Converting a Hugging Face decoder folder (llama/SmolLM, qwen2, gemma3: `config.json`,
//! `*.safetensors` — one file or shards listed by `model.safetensors.index.json` —,
//! `tokenizer.json` or Gemma's `tokenizer.model`, `tokenizer_config.json` with the chat
//! template) into a GGUF file as llama.cpp's `convert_hf_to_gguf.py` makes it: its tensor
//! names, its metadata keys, llama's q/k row permutation, Gemma's `w + 1` norms.
//!
//! Two passes, so that one code path makes every output type: the tensors are first written
//! (renamed, transformed; matrices in their stored F32/F16/BF16, vectors as F32, as the
//! converter keeps them) to a scratch GGUF beside the output, which [`quantize_model`] then
//! turns into the requested type with llama-quantize's per-tensor rules. The scratch file is
//! removed whatever happens.
//!
//! Files: `config.rs` (config.json and the model keys), `names.rs` (tensor names and
//! transforms), `vocab.rs` (BPE tokenizers and special tokens), `sentencepiece.rs` (Gemma).

mod config;
mod names;
mod sentencepiece;
mod vocab;

use std::collections::BTreeSet;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use ::safetensors::SafeTensors;

pub use config::{DecoderConfig, Family};
pub use names::{map as gguf_name, permute_rows, Transform};

use super::HfError;
use crate::dtype::GgmlType;
use crate::gguf::{gguf_header, ModelFile, TensorHeader, Value};
use crate::quant;
use crate::quantize::{plan, quantize_model, Progress, QuantizeError, QuantizeOptions, Summary};

/// Why a conversion failed.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error(transparent)]
    Hf(#[from] HfError),
    #[error(transparent)]
    Quantize(#[from] QuantizeError),
    #[error("{path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("cancelled")]
    Cancelled,
}

/// How far a conversion is: `phase` is `reading` (the first pass) or `writing` (the second).
#[derive(Clone, Debug)]
pub struct ConvertProgress {
    pub phase: &'static str,
    pub done: u64,
    pub total: u64,
}

/// Whether `dir` holds a decoder this converter knows (its `config.json` says so).
pub fn is_decoder_folder(dir: &Path) -> bool {
    let path = dir.join("config.json");
    path.is_file() && DecoderConfig::read(&path).is_ok()
}

/// The safetensors files of the folder: those named by the shard index, else every
/// `*.safetensors` file, sorted.
pub(crate) fn shard_files(dir: &Path) -> Result<Vec<PathBuf>, HfError> {
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        let j: serde_json::Value = super::config::read_json(&index)?;
        let files: BTreeSet<String> = j["weight_map"]
            .as_object()
            .ok_or_else(|| HfError::Config {
                path: index.display().to_string(),
                message: "weight_map is missing".into(),
            })?
            .values()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        for f in &files {
            if f.contains('/') || f.contains("..") {
                return Err(HfError::Config {
                    path: index.display().to_string(),
                    message: format!("shard {f:?} is not a file of this folder"),
                });
            }
        }
        return Ok(files.into_iter().map(|f| dir.join(f)).collect());
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| HfError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(HfError::Io {
            path: dir.display().to_string(),
            message: "has no *.safetensors file".into(),
        });
    }
    Ok(files)
}

/// One tensor of the scratch file, with where its bytes come from.
struct Planned {
    header: TensorHeader,
    shard: usize,
    hf_name: String,
    transform: Transform,
}

/// The GGUF type of a safetensors float dtype (the ones both converters copy as they are).
pub(crate) fn float_type(d: ::safetensors::Dtype) -> Option<GgmlType> {
    use ::safetensors::Dtype;
    match d {
        Dtype::F32 => Some(GgmlType::F32),
        Dtype::F16 => Some(GgmlType::F16),
        Dtype::BF16 => Some(GgmlType::BF16),
        _ => None,
    }
}

fn to_f32(ty: GgmlType, bytes: &[u8]) -> Vec<u8> {
    let n = bytes.len() / ty.type_size();
    let mut f = vec![0f32; n];
    quant::dequantize(ty, bytes, &mut f).expect("float types always dequantize");
    f.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn map_shard(path: &Path) -> Result<memmap2::Mmap, HfError> {
    let file = std::fs::File::open(path).map_err(|e| HfError::io(path, e))?;
    // SAFETY: read-only map of a file we only read; see gguf::ModelFile::open.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| HfError::io(path, e))
}

fn st_error(path: &Path, e: impl std::fmt::Display) -> HfError {
    HfError::Safetensors {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Converts the folder `dir` into a GGUF written to `out`, as `opts` says (file type,
/// requantization never applies: the sources are floats). `scratch` is where the first pass
/// writes (removed before returning). `name` is `general.name` (default: the folder name).
pub fn convert(
    dir: &Path,
    name: Option<&str>,
    scratch: &Path,
    out: &mut dyn Write,
    opts: &QuantizeOptions,
    progress: &mut dyn FnMut(&ConvertProgress) -> bool,
) -> Result<Summary, ConvertError> {
    let _remove = RemoveOnDrop(scratch.to_path_buf());
    write_scratch(dir, name, scratch, progress)?;
    let src = ModelFile::open(scratch).map_err(|e| ConvertError::Write {
        path: scratch.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })?;
    plan(&src.gguf, opts)?;
    let summary = quantize_model(&src, out, opts, &mut |p: &Progress| {
        progress(&ConvertProgress {
            phase: "writing",
            done: p.bytes_done,
            total: p.bytes_total,
        })
    })
    .map_err(|e| match e {
        QuantizeError::Cancelled => ConvertError::Cancelled,
        e => ConvertError::Quantize(e),
    })?;
    Ok(summary)
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The first pass: every tensor under its GGUF name, transformed, with the full metadata.
fn write_scratch(
    dir: &Path,
    name: Option<&str>,
    scratch: &Path,
    progress: &mut dyn FnMut(&ConvertProgress) -> bool,
) -> Result<(), ConvertError> {
    let config = DecoderConfig::read(&dir.join("config.json"))?;
    let family = config.family();
    let folder = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "model".into());
    let mut metadata: Vec<(String, Value)> = config.metadata(name.unwrap_or(&folder));
    metadata.extend(vocab::metadata(dir, &config)?);

    let files = shard_files(dir)?;
    let maps: Vec<memmap2::Mmap> = files
        .iter()
        .map(|f| map_shard(f))
        .collect::<Result<_, _>>()?;
    let mut planned = Vec::new();
    let mut seen = BTreeSet::new();
    let (n_head, n_kv) = (config.num_attention_heads, config.n_kv_heads());
    for (shard, (path, map)) in files.iter().zip(&maps).enumerate() {
        let (_, meta) = SafeTensors::read_metadata(map).map_err(|e| st_error(path, e))?;
        let infos = meta.tensors();
        for hf_name in meta.offset_keys() {
            let Some((gguf, transform)) = names::map(family, &hf_name, n_head, n_kv) else {
                continue;
            };
            let info = infos[&hf_name];
            let ty = float_type(info.dtype).ok_or_else(|| {
                st_error(
                    path,
                    format!(
                        "tensor {hf_name} is {:?}; only F32, F16 and BF16 can be converted",
                        info.dtype
                    ),
                )
            })?;
            let dims: Vec<u64> = info.shape.iter().rev().map(|&d| d as u64).collect();
            let n: u64 = dims.iter().product();
            // Vectors (norms, biases) stay F32, as llama.cpp's converter keeps them.
            let out_ty = if dims.len() <= 1 || transform == Transform::AddOne {
                GgmlType::F32
            } else {
                ty
            };
            if let Transform::PermuteRope(h) = transform {
                if dims.len() != 2 || !info.shape[0].is_multiple_of(2 * h) {
                    return Err(st_error(
                        path,
                        format!(
                            "tensor {hf_name} of shape {:?} does not split into {h} heads",
                            info.shape
                        ),
                    )
                    .into());
                }
            }
            if !seen.insert(gguf.clone()) {
                return Err(st_error(path, format!("tensor {gguf} appears twice")).into());
            }
            planned.push(Planned {
                header: TensorHeader {
                    name: gguf,
                    dims: if dims.is_empty() { vec![1] } else { dims },
                    ty: out_ty,
                    n_bytes: n * out_ty.type_size() as u64,
                },
                shard,
                hf_name,
                transform,
            });
        }
    }
    if !seen.contains("token_embd.weight") {
        return Err(HfError::Config {
            path: dir.display().to_string(),
            message: "no model.embed_tokens.weight in the safetensors files".into(),
        }
        .into());
    }
    let headers: Vec<TensorHeader> = planned.iter().map(|p| p.header.clone()).collect();
    let (header, offsets) = gguf_header(&metadata, &headers, 32);
    let werr = |source: std::io::Error| ConvertError::Write {
        path: scratch.display().to_string(),
        source,
    };
    let file = std::fs::File::create(scratch).map_err(werr)?;
    let mut w = BufWriter::with_capacity(4 << 20, file);
    w.write_all(&header).map_err(werr)?;
    let total: u64 = headers.iter().map(|h| h.n_bytes).sum();
    let mut written = 0u64;
    let parsed: Vec<SafeTensors> = files
        .iter()
        .zip(&maps)
        .map(|(p, m)| SafeTensors::deserialize(m).map_err(|e| st_error(p, e)))
        .collect::<Result<_, _>>()?;
    for (p, &offset) in planned.iter().zip(&offsets) {
        w.write_all(&vec![0u8; (offset - written) as usize])
            .map_err(werr)?;
        let view = parsed[p.shard]
            .tensor(&p.hf_name)
            .map_err(|e| st_error(&files[p.shard], e))?;
        let src_ty = float_type(view.dtype()).expect("checked above");
        let data = view.data();
        let bytes: std::borrow::Cow<[u8]> = match p.transform {
            Transform::PermuteRope(h) => {
                let rows = view.shape()[0];
                names::permute_rows(data, rows, h)
                    .expect("checked above")
                    .into()
            }
            Transform::AddOne => {
                let f = to_f32(src_ty, data);
                f.chunks_exact(4)
                    .flat_map(|c| (f32::from_le_bytes(c.try_into().unwrap()) + 1.0).to_le_bytes())
                    .collect::<Vec<u8>>()
                    .into()
            }
            Transform::None if p.header.ty != src_ty => to_f32(src_ty, data).into(),
            Transform::None => data.into(),
        };
        let bytes = if matches!(p.transform, Transform::PermuteRope(_)) && p.header.ty != src_ty {
            to_f32(src_ty, &bytes).into()
        } else {
            bytes
        };
        w.write_all(&bytes).map_err(werr)?;
        written = offset + bytes.len() as u64;
        if !progress(&ConvertProgress {
            phase: "reading",
            done: written.min(total),
            total,
        }) {
            return Err(ConvertError::Cancelled);
        }
    }
    w.into_inner()
        .map_err(|e| werr(std::io::Error::other(e.to_string())))?
        .sync_all()
        .map_err(werr)?;
    Ok(())
}
