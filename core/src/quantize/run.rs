//! Planning a quantization and streaming the new file.

use std::io::Write;

use super::rules::{choose_types, llama_order, ModelShape, TensorDesc};
use super::{Progress, QuantizeError, QuantizeOptions, Summary};
use crate::dtype::GgmlType;
use crate::gguf::{gguf_header, Gguf, ModelFile, TensorHeader, Value};
use crate::quant;

/// Keys llama.cpp drops from a quantized file (it writes one file) or sets anew.
const DROPPED_KEYS: [&str; 5] = [
    "general.quantization_version",
    "general.file_type",
    "split.no",
    "split.count",
    "split.tensors.count",
];

/// GGML's quantization version, written to `general.quantization_version`.
const QUANTIZATION_VERSION: u32 = 2;

/// Elements converted per slab: bounds memory (an f32 copy of the slab) whatever the model.
const SLAB_ELEMENTS: u64 = 16 << 20;

/// One output tensor.
#[derive(Clone, Debug)]
pub struct PlannedTensor {
    /// Index into the source's tensor list.
    pub source: usize,
    pub name: String,
    pub dims: Vec<u64>,
    pub from: GgmlType,
    pub to: GgmlType,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// Everything decided before writing: the output's metadata, tensors and header.
#[derive(Clone, Debug)]
pub struct Plan {
    pub metadata: Vec<(String, Value)>,
    /// In output order (llama.cpp's).
    pub tensors: Vec<PlannedTensor>,
    pub alignment: u64,
    /// The header bytes (padded), and each tensor's offset in the data section.
    header: Vec<u8>,
    offsets: Vec<u64>,
}

impl Plan {
    /// Size of the output file in bytes.
    pub fn file_bytes(&self) -> u64 {
        let last = self.tensors.last().map_or(0, |t| {
            (self.offsets[self.tensors.len() - 1] + t.bytes_out).div_ceil(self.alignment)
                * self.alignment
        });
        self.header.len() as u64 + last
    }
}

fn is_block_quantized(ty: GgmlType) -> bool {
    ty.block_size() > 1
}

/// Decides every tensor's type and the output header, refusing what cannot be done.
pub fn plan(g: &Gguf, opts: &QuantizeOptions) -> Result<Plan, QuantizeError> {
    let descs: Vec<TensorDesc> = g
        .tensors
        .iter()
        .map(|t| TensorDesc {
            name: &t.name,
            dims: &t.dims,
            ty: t.ty,
        })
        .collect();
    let order = llama_order(&descs);
    let ordered: Vec<TensorDesc> = order.iter().map(|&i| descs[i].clone()).collect();
    let types = choose_types(&ordered, &ModelShape::of(g), opts.ftype, opts.pure);
    let mut tensors = Vec::with_capacity(order.len());
    for (&i, to) in order.iter().zip(types) {
        let t = &g.tensors[i];
        if to != t.ty {
            if is_block_quantized(t.ty) && !opts.allow_requantize {
                return Err(QuantizeError::Requantize {
                    tensor: t.name.clone(),
                    from: t.ty,
                });
            }
            if !quant::is_supported(t.ty) {
                return Err(QuantizeError::CannotRead {
                    tensor: t.name.clone(),
                    ty: t.ty,
                });
            }
            if !quant::can_quantize_reference(to) {
                return Err(QuantizeError::CannotWrite {
                    tensor: t.name.clone(),
                    ty: to,
                });
            }
        }
        let bytes_out = to
            .bytes_for(t.n_elements)
            .ok_or_else(|| QuantizeError::CannotWrite {
                tensor: t.name.clone(),
                ty: to,
            })?;
        tensors.push(PlannedTensor {
            source: i,
            name: t.name.clone(),
            dims: t.dims.clone(),
            from: t.ty,
            to,
            bytes_in: t.n_bytes,
            bytes_out,
        });
    }
    let mut metadata: Vec<(String, Value)> = g
        .metadata
        .iter()
        .filter(|(k, _)| !DROPPED_KEYS.contains(&k.as_str()))
        .cloned()
        .collect();
    metadata.push((
        "general.quantization_version".into(),
        Value::U32(QUANTIZATION_VERSION),
    ));
    metadata.push((
        "general.file_type".into(),
        Value::U32(opts.ftype.llama_number()),
    ));
    let headers: Vec<TensorHeader> = tensors
        .iter()
        .map(|t| TensorHeader {
            name: t.name.clone(),
            dims: t.dims.clone(),
            ty: t.to,
            n_bytes: t.bytes_out,
        })
        .collect();
    let (header, offsets) = gguf_header(&metadata, &headers, g.alignment);
    Ok(Plan {
        metadata,
        tensors,
        alignment: g.alignment,
        header,
        offsets,
    })
}

/// Quantizes `src` as `opts` says, writing the new file to `out`. `progress` is called after
/// each slab; returning `false` cancels ([`QuantizeError::Cancelled`]; what was written so far
/// is the caller's to remove).
pub fn quantize_model(
    src: &ModelFile,
    out: &mut dyn Write,
    opts: &QuantizeOptions,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<Summary, QuantizeError> {
    let plan = plan(&src.gguf, opts)?;
    out.write_all(&plan.header)?;
    let mut written = 0u64; // within the data section
    let mut p = Progress {
        tensors_total: plan.tensors.len(),
        bytes_total: plan.tensors.iter().map(|t| t.bytes_in).sum(),
        ..Progress::default()
    };
    let threads = opts.threads.max(1);
    let mut scratch = Vec::new();
    let mut dst = Vec::new();
    for (t, &offset) in plan.tensors.iter().zip(&plan.offsets) {
        let pad = offset - written;
        out.write_all(&vec![0u8; pad as usize])?;
        written = offset;
        p.tensor.clone_from(&t.name);
        let info = &src.gguf.tensors[t.source];
        let data = src.tensor_data(info);
        if data.len() as u64 != t.bytes_in {
            return Err(QuantizeError::BadTensor {
                tensor: t.name.clone(),
                len: data.len(),
                expected: t.bytes_in,
            });
        }
        let n_per_row = t.dims.first().copied().unwrap_or(1).max(1);
        let rows = info.n_elements / n_per_row;
        let rows_per_slab = (SLAB_ELEMENTS / n_per_row).max(1);
        let row_in = t.bytes_in / rows.max(1);
        let row_out = t.bytes_out / rows.max(1);
        let mut r = 0u64;
        while r < rows {
            let nr = rows_per_slab.min(rows - r);
            let inp = &data[(r * row_in) as usize..((r + nr) * row_in) as usize];
            if t.from == t.to {
                out.write_all(inp)?;
            } else {
                dst.resize((nr * row_out) as usize, 0);
                convert_rows(t, inp, &mut dst, n_per_row as usize, threads, &mut scratch);
                out.write_all(&dst)?;
            }
            r += nr;
            p.bytes_done += nr * row_in;
            if !progress(&p) {
                return Err(QuantizeError::Cancelled);
            }
        }
        written += t.bytes_out;
        p.tensors_done += 1;
    }
    let end = written.div_ceil(plan.alignment) * plan.alignment;
    out.write_all(&vec![0u8; (end - written) as usize])?;
    out.flush()?;
    Ok(Summary {
        tensors: plan.tensors.len(),
        bytes_in: p.bytes_total,
        bytes_out: plan.tensors.iter().map(|t| t.bytes_out).sum(),
        file_bytes: plan.file_bytes(),
    })
}

/// Dequantizes whole rows of `t.from` and quantizes them to `t.to`, the rows split evenly
/// over `threads` threads.
fn convert_rows(
    t: &PlannedTensor,
    inp: &[u8],
    out: &mut [u8],
    n_per_row: usize,
    threads: usize,
    scratch: &mut Vec<f32>,
) {
    let rows = out.len() / t.to.bytes_for(n_per_row as u64).unwrap_or(1) as usize;
    let row_in = inp.len() / rows;
    let row_out = out.len() / rows;
    scratch.resize(rows * n_per_row, 0.0);
    let per = rows.div_ceil(threads);
    let work = |(inp, (f, out)): (&[u8], (&mut [f32], &mut [u8]))| {
        // Both sizes were checked by `plan`; the types are supported there too.
        quant::dequantize(t.from, inp, f).expect("planned dequantization");
        quant::quantize_reference(t.to, f, out).expect("planned quantization");
    };
    let parts = inp.chunks(per * row_in).zip(
        scratch
            .chunks_mut(per * n_per_row)
            .zip(out.chunks_mut(per * row_out)),
    );
    if threads == 1 {
        parts.for_each(work);
        return;
    }
    let work = &work;
    std::thread::scope(|s| {
        for part in parts {
            s.spawn(move || work(part));
        }
    });
}
