//! Converting the vision part of a Hugging Face vision-language folder (Idefics3 / SmolVLM,
//! Qwen2.5-VL, Gemma 3) into the `mmproj` GGUF llama.cpp's `convert_hf_to_gguf.py --mmproj`
//! writes: architecture `clip`, its `clip.*` keys, its tensor names, per-tensor types and
//! transforms (Qwen2.5-VL's fused q/k/v split in three and its Conv3D patch embedding split in
//! two Conv2D kernels; Gemma 3's `soft_emb_norm + 1`).
//!
//! One pass: the tensors are small next to a text model, and an mmproj is always a float file
//! (F32, F16 or BF16), so each tensor is converted as it is written. Tensors come in the
//! reference's order: shards by file name, names sorted within each. `general.name` and
//! `general.size_label` follow gguf-py's rules for a folder without a model card: the folder
//! name title-cased, the parameter count rounded (a size written in the folder name is not
//! parsed out as gguf-py would).
//!
//! Files: `families.rs` (names, types, transforms, `clip.*` keys per family).

mod families;

use std::io::Write;
use std::path::Path;

use ::safetensors::SafeTensors;
use serde_json::Value as Json;

pub use families::{clip_metadata, map, tensor_type, Mapped, Op, VisionFamily};

use super::decoder::{float_type, shard_files, ConvertError};
use super::HfError;
use crate::dtype::GgmlType;
use crate::gguf::{gguf_header, TensorHeader, Value};

/// The family of the vision-language folder `dir`, or None when its `config.json` is not one
/// (or cannot be read).
pub fn vision_family(dir: &Path) -> Option<VisionFamily> {
    let config: Json = super::config::read_json(&dir.join("config.json")).ok()?;
    VisionFamily::from_config(&config)
}

/// The mmproj file's type for a text output type: llama.cpp's converter writes F32, F16 or
/// BF16 projectors; a quantized text model gets an F16 projector (the usual pairing).
pub fn mmproj_type(text: crate::quantize::FileType) -> GgmlType {
    use crate::quantize::FileType;
    match text {
        FileType::F32 => GgmlType::F32,
        FileType::BF16 => GgmlType::BF16,
        _ => GgmlType::F16,
    }
}

/// `preprocessor_config.json`, then `processor_config.json` over it (each with its nested
/// `media_proc_cfg` / `image_processor` lifted to the top), as MmprojModel merges them.
fn preprocessor(dir: &Path) -> Result<Json, HfError> {
    let mut merged = serde_json::Map::new();
    for (file, nested) in [
        ("preprocessor_config.json", "media_proc_cfg"),
        ("processor_config.json", "image_processor"),
    ] {
        let path = dir.join(file);
        if !path.is_file() {
            continue;
        }
        let j: Json = super::config::read_json(&path)?;
        let Some(obj) = j.as_object() else { continue };
        merged.extend(obj.clone());
        if let Some(inner) = obj.get(nested).and_then(Json::as_object) {
            merged.extend(inner.clone());
        }
    }
    Ok(Json::Object(merged))
}

/// gguf-py's `Metadata.id_to_title`: words (split at spaces and dashes) in lower case are
/// title-cased as Python's `str.title` does (a letter after a non-letter is upper case), unless
/// they look like a version (`v1.2`) or start with a digit.
pub fn id_to_title(id: &str) -> String {
    let words = id.trim().replace('-', " ");
    let words: Vec<String> = words
        .split_whitespace()
        .map(|w| {
            let lower = w.chars().any(char::is_alphabetic)
                && !w.chars().any(|c| c.is_alphabetic() && !c.is_lowercase());
            let version = w.starts_with(|c: char| c.is_ascii_digit())
                || (w.starts_with('v')
                    && w.len() > 1
                    && w[1..]
                        .split('.')
                        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())));
            if !lower || version {
                return w.to_string();
            }
            let mut out = String::new();
            let mut after_letter = false;
            for c in w.chars() {
                if c.is_alphabetic() {
                    if after_letter {
                        out.extend(c.to_lowercase());
                    } else {
                        out.extend(c.to_uppercase());
                    }
                    after_letter = true;
                } else {
                    out.push(c);
                    after_letter = false;
                }
            }
            out
        })
        .collect();
    words.join(" ")
}

/// gguf-py's `size_label` for `n` parameters: `215K`, `1.5M`, `12B` (two significant digits
/// at least).
pub fn size_label(n: u64) -> String {
    let x = n as f64;
    let (scaled, suffix) = if x > 1e12 {
        (x * 1e-12, "T")
    } else if x > 1e9 {
        (x * 1e-9, "B")
    } else if x > 1e6 {
        (x * 1e-6, "M")
    } else {
        (x * 1e-3, "K")
    };
    let rounded = scaled.round_ties_even() as u64;
    let digits = if rounded == 0 {
        0
    } else {
        rounded.to_string().len()
    };
    let fix = 2usize.saturating_sub(digits);
    format!("{scaled:.fix$}{suffix}")
}

/// One output tensor and where its bytes come from.
struct Planned {
    header: TensorHeader,
    shard: usize,
    hf_name: String,
    op: Op,
}

fn st_error(path: &Path, e: impl std::fmt::Display) -> HfError {
    HfError::Safetensors {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

fn config_error(dir: &Path, message: String) -> HfError {
    HfError::Config {
        path: dir.join("config.json").display().to_string(),
        message,
    }
}

/// What an mmproj conversion wrote.
#[derive(Clone, Debug)]
pub struct MmprojSummary {
    pub family: VisionFamily,
    pub tensors: usize,
    pub bytes: u64,
}

/// Writes the mmproj GGUF of the folder `dir` to `out`, with weights of type `ty` (F32, F16 or
/// BF16) where the converter does not force another. `name` is `general.name` (default: the
/// folder name title-cased, as gguf-py derives it).
pub fn convert_mmproj(
    dir: &Path,
    name: Option<&str>,
    out: &mut dyn Write,
    ty: GgmlType,
) -> Result<MmprojSummary, ConvertError> {
    if !matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
        return Err(config_error(dir, format!("an mmproj is F32, F16 or BF16, not {ty:?}")).into());
    }
    let config: Json = super::config::read_json(&dir.join("config.json"))?;
    let family = VisionFamily::from_config(&config).ok_or_else(|| {
        config_error(
            dir,
            "not a vision model the converter knows (Idefics3 / SmolVLM, Qwen2.5-VL, Gemma 3)"
                .into(),
        )
    })?;
    let pre = preprocessor(dir)?;
    let clip = clip_metadata(family, &config, &pre).map_err(|m| config_error(dir, m))?;

    let files = shard_files(dir)?;
    let maps: Vec<memmap2::Mmap> = files
        .iter()
        .map(|f| super::decoder::map_shard(f))
        .collect::<Result<_, _>>()?;
    let parsed: Vec<SafeTensors> = files
        .iter()
        .zip(&maps)
        .map(|(p, m)| SafeTensors::deserialize(m).map_err(|e| st_error(p, e)))
        .collect::<Result<_, _>>()?;
    let mut planned = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (shard, (path, st)) in files.iter().zip(&parsed).enumerate() {
        let mut names: Vec<String> = st.names().into_iter().map(str::to_string).collect();
        names.sort();
        for hf_name in names {
            let Some(outs) = map(family, &hf_name) else {
                continue;
            };
            let view = st.tensor(&hf_name).map_err(|e| st_error(path, e))?;
            if float_type(view.dtype()).is_none() {
                return Err(st_error(
                    path,
                    format!(
                        "tensor {hf_name} is {:?}; only F32, F16 and BF16 can be converted",
                        view.dtype()
                    ),
                )
                .into());
            }
            let shape = view.shape().to_vec();
            for m in outs {
                let out_shape: Vec<usize> = match m.op {
                    Op::None | Op::AddOne => shape.clone(),
                    Op::ThirdOfRows(_) if !shape.is_empty() && shape[0] % 3 == 0 => {
                        let mut s = shape.clone();
                        s[0] /= 3;
                        s
                    }
                    Op::TimeSlice(_) if shape.len() == 5 && shape[2] == 2 => {
                        vec![shape[0], shape[1], shape[3], shape[4]]
                    }
                    _ => {
                        return Err(st_error(
                            path,
                            format!("tensor {hf_name} has an unexpected shape {shape:?}"),
                        )
                        .into())
                    }
                };
                let out_ty = tensor_type(family, &hf_name, &m.name, out_shape.len(), ty);
                let dims: Vec<u64> = out_shape.iter().rev().map(|&d| d as u64).collect();
                let n: u64 = dims.iter().product();
                if !seen.insert(m.name.clone()) {
                    return Err(st_error(path, format!("tensor {} appears twice", m.name)).into());
                }
                planned.push(Planned {
                    header: TensorHeader {
                        name: m.name,
                        dims: if dims.is_empty() { vec![1] } else { dims },
                        ty: out_ty,
                        n_bytes: n * out_ty.type_size() as u64,
                    },
                    shard,
                    hf_name: hf_name.clone(),
                    op: m.op,
                });
            }
        }
    }
    if !seen.iter().any(|n| n.starts_with("v.blk.")) {
        return Err(config_error(dir, "the safetensors files hold no vision tower".into()).into());
    }

    let folder = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "model".into());
    let params: u64 = planned
        .iter()
        .map(|p| p.header.dims.iter().product::<u64>())
        .sum();
    let file_type = match ty {
        GgmlType::F32 => 0,
        GgmlType::BF16 => 32,
        _ => 1,
    };
    let mut metadata: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String("clip".into())),
        ("general.type".into(), Value::String("mmproj".into())),
        (
            "general.name".into(),
            Value::String(name.map_or_else(|| id_to_title(&folder), str::to_string)),
        ),
        (
            "general.size_label".into(),
            Value::String(size_label(params)),
        ),
        ("general.file_type".into(), Value::U32(file_type)),
    ];
    metadata.extend(clip);
    metadata.push(("general.quantization_version".into(), Value::U32(2)));

    let headers: Vec<TensorHeader> = planned.iter().map(|p| p.header.clone()).collect();
    let (header, offsets) = gguf_header(&metadata, &headers, 32);
    let werr = |source: std::io::Error| ConvertError::Write {
        path: "mmproj output".into(),
        source,
    };
    out.write_all(&header).map_err(werr)?;
    let mut written = 0u64;
    for (p, &offset) in planned.iter().zip(&offsets) {
        out.write_all(&vec![0u8; (offset - written) as usize])
            .map_err(werr)?;
        let view = parsed[p.shard]
            .tensor(&p.hf_name)
            .map_err(|e| st_error(&files[p.shard], e))?;
        let src_ty = float_type(view.dtype()).expect("checked above");
        let bytes = tensor_bytes(view.data(), view.shape(), src_ty, p.op, p.header.ty);
        debug_assert_eq!(bytes.len() as u64, p.header.n_bytes);
        out.write_all(&bytes).map_err(werr)?;
        written = offset + bytes.len() as u64;
    }
    // gguf-py pads every tensor's data, the last one too.
    let end = written.next_multiple_of(32);
    out.write_all(&vec![0u8; (end - written) as usize])
        .map_err(werr)?;
    Ok(MmprojSummary {
        family,
        tensors: planned.len(),
        bytes: header.len() as u64 + end,
    })
}

/// The bytes of one output tensor: `op` applied to the source (`data`, `shape`, `src`), then
/// converted to `dst` (through f32, rounding to nearest even, as numpy does).
fn tensor_bytes(data: &[u8], shape: &[usize], src: GgmlType, op: Op, dst: GgmlType) -> Vec<u8> {
    let es = src.type_size();
    let picked: Vec<u8> = match op {
        Op::None => data.to_vec(),
        Op::ThirdOfRows(i) => {
            let part = data.len() / 3;
            data[i * part..(i + 1) * part].to_vec()
        }
        Op::TimeSlice(t) => {
            // [o, i, 2, h, w]: keep plane t of each (o, i).
            let plane = shape[3] * shape[4] * es;
            data.chunks_exact(2 * plane)
                .flat_map(|c| &c[t * plane..(t + 1) * plane])
                .copied()
                .collect()
        }
        // In the source precision, as torch adds 1 to the tensor it loaded.
        Op::AddOne => match src {
            GgmlType::F16 => data
                .chunks_exact(2)
                .flat_map(|c| {
                    let x = half::f16::from_le_bytes([c[0], c[1]]).to_f32();
                    half::f16::from_f32(x + 1.0).to_le_bytes()
                })
                .collect(),
            GgmlType::BF16 => data
                .chunks_exact(2)
                .flat_map(|c| {
                    let x = half::bf16::from_le_bytes([c[0], c[1]]).to_f32();
                    half::bf16::from_f32(x + 1.0).to_le_bytes()
                })
                .collect(),
            _ => data
                .chunks_exact(4)
                .flat_map(|c| (f32::from_le_bytes([c[0], c[1], c[2], c[3]]) + 1.0).to_le_bytes())
                .collect(),
        },
    };
    if src == dst {
        return picked;
    }
    let f: Vec<f32> = match src {
        GgmlType::F16 => picked
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        GgmlType::BF16 => picked
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        _ => picked
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    };
    match dst {
        GgmlType::F16 => f
            .iter()
            .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
            .collect(),
        GgmlType::BF16 => f
            .iter()
            .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
            .collect(),
        _ => f.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sizes_as_gguf_py() {
        assert_eq!(id_to_title("idefics3"), "Idefics3");
        assert_eq!(id_to_title("qwen25vl"), "Qwen25Vl");
        assert_eq!(
            id_to_title("SmolVLM-256M-Instruct"),
            "SmolVLM 256M Instruct"
        );
        assert_eq!(id_to_title("gemma-3-4b-it"), "Gemma 3 4b It");
        assert_eq!(size_label(214_592), "215K");
        assert_eq!(size_label(1_500_000), "1.5M");
        assert_eq!(size_label(412_000_000), "412M");
    }

    #[test]
    fn time_slice_keeps_one_frame() {
        // [o=1, i=2, t=2, h=1, w=2] in f32: planes (i0,t0) (i0,t1) (i1,t0) (i1,t1).
        let v: Vec<f32> = (0..8).map(|x| x as f32).collect();
        let data: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let got = tensor_bytes(
            &data,
            &[1, 2, 2, 1, 2],
            GgmlType::F32,
            Op::TimeSlice(1),
            GgmlType::F32,
        );
        let f: Vec<f32> = got
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(f, vec![2.0, 3.0, 6.0, 7.0]);
    }
}
