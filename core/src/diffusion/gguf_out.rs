//! Writing one diffusers / transformers component (its safetensors files) as a GGUF file:
//! tensors renamed by a name map, each in the type a rule picks, streamed from the memory
//! maps. Shared by the Wan DiT and UMT5 conversions of `wan_convert`.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use safetensors::SafeTensors;

use super::files::ModelFileError;
use crate::dtype::GgmlType;
use crate::gguf::{gguf_header, TensorHeader, Value};
use crate::hf::decoder::{float_type, map_shard, shard_files};
use crate::quant;
use crate::quantize::FileType;

/// What `--type` asks for: None keeps every tensor's stored float type.
pub(super) type Target = Option<FileType>;

/// Tensors small enough, or sensitive enough, to stay F32 whatever the target (city96's
/// converter: vectors, tensors of at most 1024 elements, Wan's modulations; widening a
/// stored F16 / BF16 to F32 is exact).
pub(super) fn keeps_f32(name: &str, shape: &[usize]) -> bool {
    shape.len() <= 1 || shape.iter().product::<usize>() <= 1024 || name.ends_with("modulation")
}

/// The type a tensor is written in: F32 for [`keeps_f32`] ones, else the target (a quantized
/// one only where the row length fits its blocks; else the stored type), else the stored
/// type.
pub(super) fn out_type(name: &str, shape: &[usize], stored: GgmlType, target: Target) -> GgmlType {
    if keeps_f32(name, shape) {
        return GgmlType::F32;
    }
    let Some(t) = target.map(FileType::default_type) else {
        return stored;
    };
    let row = *shape.last().unwrap_or(&0);
    if t.block_size() == 1
        || (shape.len() == 2 && row.is_multiple_of(t.block_size()) && quant::can_quantize(t))
    {
        t
    } else {
        stored
    }
}

/// `general.file_type` (llama.cpp's numbering) for a file whose tensors are `types`.
pub(super) fn file_type(target: Target, types: &[GgmlType]) -> u32 {
    if let Some(t) = target {
        return t.llama_number();
    }
    let count = |t: GgmlType| types.iter().filter(|&&x| x == t).count();
    if count(GgmlType::BF16) > 0 && count(GgmlType::BF16) >= count(GgmlType::F16) {
        FileType::BF16.llama_number()
    } else if count(GgmlType::F16) > 0 {
        FileType::F16.llama_number()
    } else {
        FileType::F32.llama_number()
    }
}

/// A component's safetensors files, mapped.
pub(super) struct Component {
    pub files: Vec<PathBuf>,
    maps: Vec<memmap2::Mmap>,
}

impl Component {
    pub fn open(dir: &Path) -> Result<Self, ModelFileError> {
        let weights = |e: crate::hf::HfError| ModelFileError::Weights {
            path: dir.display().to_string(),
            message: e.to_string(),
        };
        let files = shard_files(dir).map_err(weights)?;
        let maps = files
            .iter()
            .map(|f| map_shard(f))
            .collect::<Result<Vec<_>, _>>()
            .map_err(weights)?;
        Ok(Component { files, maps })
    }

    /// Each file parsed, with its path.
    pub fn parsed(&self) -> Result<Vec<(&Path, SafeTensors<'_>)>, ModelFileError> {
        self.files
            .iter()
            .zip(&self.maps)
            .map(|(p, m)| {
                let st = SafeTensors::deserialize(m).map_err(|e| ModelFileError::Weights {
                    path: p.display().to_string(),
                    message: format!("not a valid safetensors file: {e}"),
                })?;
                Ok((p.as_path(), st))
            })
            .collect()
    }
}

/// One tensor to write: where it comes from and what it becomes.
struct Planned<'a> {
    header: TensorHeader,
    source: safetensors::tensor::TensorView<'a>,
    stored: GgmlType,
}

/// Writes `component` to `out` as GGUF: every tensor renamed by `rename` (a name it gives
/// None is an error naming it, unless `skip` says the tensor is not used), in the type
/// `pick(gguf_name, shape, stored)` gives; `metadata` first, then `general.file_type` and
/// `general.quantization_version`. Written to a `.part` file renamed at the end, so a failed
/// or cancelled conversion leaves no half file. Returns the bytes written.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_component(
    component: &Component,
    rename: &dyn Fn(&str) -> Option<String>,
    skip: &dyn Fn(&str) -> bool,
    pick: &dyn Fn(&str, &[usize], GgmlType) -> GgmlType,
    target: Target,
    mut metadata: Vec<(String, Value)>,
    out: &Path,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<u64, ModelFileError> {
    let parsed = component.parsed()?;
    let mut planned: Vec<Planned> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (path, st) in &parsed {
        let weights = |message: String| ModelFileError::Weights {
            path: path.display().to_string(),
            message,
        };
        let mut names = st.names();
        names.sort();
        for name in names {
            let Some(gguf) = rename(name) else {
                if skip(name) {
                    continue;
                }
                return Err(weights(format!(
                    "tensor {name} has no GGUF name: not part of the model this folder says \
                     it is"
                )));
            };
            let view = st
                .tensor(name)
                .map_err(|e| weights(format!("tensor {name}: {e}")))?;
            let stored = float_type(view.dtype()).ok_or_else(|| {
                weights(format!(
                    "tensor {name} is {:?}; only F32, F16 and BF16 can be converted",
                    view.dtype()
                ))
            })?;
            if !seen.insert(gguf.clone()) {
                return Err(weights(format!(
                    "tensor {gguf} appears twice (from {name})"
                )));
            }
            let shape = view.shape().to_vec();
            let ty = pick(&gguf, &shape, stored);
            let n: u64 = shape.iter().map(|&d| d as u64).product();
            let dims: Vec<u64> = shape.iter().rev().map(|&d| d as u64).collect();
            let n_bytes = ty
                .bytes_for(n)
                .ok_or_else(|| weights(format!("tensor {name} does not fit type {ty}")))?;
            planned.push(Planned {
                header: TensorHeader {
                    name: gguf,
                    dims: if dims.is_empty() { vec![1] } else { dims },
                    ty,
                    n_bytes,
                },
                source: view,
                stored,
            });
        }
    }
    let types: Vec<GgmlType> = planned.iter().map(|p| p.header.ty).collect();
    metadata.push((
        "general.file_type".into(),
        Value::U32(file_type(target, &types)),
    ));
    metadata.push(("general.quantization_version".into(), Value::U32(2)));
    let headers: Vec<TensorHeader> = planned.iter().map(|p| p.header.clone()).collect();
    let (header, offsets) = gguf_header(&metadata, &headers, 32);

    let part = out.with_extension("gguf.part");
    let werr = |e: std::io::Error| ModelFileError::Io {
        path: part.display().to_string(),
        message: e.to_string(),
    };
    let result = (|| {
        let file = std::fs::File::create(&part).map_err(werr)?;
        let mut w = BufWriter::with_capacity(4 << 20, file);
        w.write_all(&header).map_err(werr)?;
        let total: u64 = headers.iter().map(|h| h.n_bytes).sum();
        let mut written = 0u64;
        for (p, &offset) in planned.iter().zip(&offsets) {
            w.write_all(&vec![0u8; (offset - written) as usize])
                .map_err(werr)?;
            let data = p.source.data();
            let bytes: std::borrow::Cow<[u8]> = if p.header.ty == p.stored {
                data.into()
            } else {
                let f = quant::dequantize_to_vec(p.stored, data, data.len() / p.stored.type_size())
                    .map_err(|e| werr(std::io::Error::other(e.to_string())))?;
                let q = quant::quantize_to_vec(p.header.ty, &f)
                    .map_err(|e| werr(std::io::Error::other(format!("{}: {e}", p.header.name))))?;
                q.into()
            };
            w.write_all(&bytes).map_err(werr)?;
            written = offset + bytes.len() as u64;
            if !progress(written.min(total), total) {
                return Err(ModelFileError::Input("cancelled".into()));
            }
        }
        w.into_inner()
            .map_err(|e| werr(std::io::Error::other(e.to_string())))?
            .sync_all()
            .map_err(werr)?;
        std::fs::rename(&part, out).map_err(|e| ModelFileError::Io {
            path: out.display().to_string(),
            message: e.to_string(),
        })?;
        Ok((header.len() as u64) + written)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    result
}
