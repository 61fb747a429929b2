//! Writing GGUF v3 files: whole files in memory ([`write_gguf`], for tests and fuzz seeds) or
//! a header to stream tensor data after ([`gguf_header`], for quantize and convert).

use super::value::{tag, Value};
use crate::dtype::GgmlType;

/// A tensor to write: name, dims (innermost first), type and its raw bytes.
pub struct TensorToWrite<'a> {
    pub name: &'a str,
    pub dims: &'a [u64],
    pub ty: GgmlType,
    pub data: &'a [u8],
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn value_tag(v: &Value) -> u32 {
    match v {
        Value::U8(_) => tag::U8,
        Value::I8(_) => tag::I8,
        Value::U16(_) => tag::U16,
        Value::I16(_) => tag::I16,
        Value::U32(_) => tag::U32,
        Value::I32(_) => tag::I32,
        Value::F32(_) => tag::F32,
        Value::Bool(_) => tag::BOOL,
        Value::String(_) => tag::STRING,
        Value::Array(_) => tag::ARRAY,
        Value::U64(_) => tag::U64,
        Value::I64(_) => tag::I64,
        Value::F64(_) => tag::F64,
    }
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.push(*x as u8),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(*x as u8),
        Value::String(s) => put_str(out, s),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Array(items) => {
            // An empty array needs some element type on disk; u8 is as good as any.
            let elem = items.first().map_or(tag::U8, value_tag);
            out.extend_from_slice(&elem.to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                put_value(out, item);
            }
        }
    }
}

/// One tensor's entry in a header: name, dims (innermost first), type and data size.
#[derive(Clone, Debug)]
pub struct TensorHeader {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    pub n_bytes: u64,
}

/// The header of a GGUF v3 file (magic, counts, metadata, tensor infos) padded to
/// `alignment`, with each tensor's data placed after the previous one's padded end. The data
/// section follows directly; tensor `i` starts at `header.len() + offsets[i]`.
pub fn gguf_header<K: AsRef<str>>(
    metadata: &[(K, Value)],
    tensors: &[TensorHeader],
    alignment: u64,
) -> (Vec<u8>, Vec<u64>) {
    let mut out = Vec::new();
    out.extend_from_slice(b"GGUF");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (k, v) in metadata {
        put_str(&mut out, k.as_ref());
        out.extend_from_slice(&value_tag(v).to_le_bytes());
        put_value(&mut out, v);
    }
    let mut offset = 0u64;
    let mut offsets = Vec::with_capacity(tensors.len());
    for t in tensors {
        put_str(&mut out, &t.name);
        out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&(t.ty as u32).to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        offsets.push(offset);
        offset = (offset + t.n_bytes).div_ceil(alignment) * alignment;
    }
    let data_start = (out.len() as u64).div_ceil(alignment) * alignment;
    out.resize(data_start as usize, 0);
    (out, offsets)
}

/// Serialises a GGUF v3 file. Array elements must all share the first element's type.
pub fn write_gguf(
    metadata: &[(&str, Value)],
    tensors: &[TensorToWrite],
    alignment: u64,
) -> Vec<u8> {
    let headers: Vec<TensorHeader> = tensors
        .iter()
        .map(|t| TensorHeader {
            name: t.name.to_string(),
            dims: t.dims.to_vec(),
            ty: t.ty,
            n_bytes: t.data.len() as u64,
        })
        .collect();
    let (mut out, offsets) = gguf_header(metadata, &headers, alignment);
    let data_start = out.len() as u64;
    for (t, off) in tensors.iter().zip(offsets) {
        out.resize((data_start + off) as usize, 0);
        out.extend_from_slice(t.data);
    }
    out
}
