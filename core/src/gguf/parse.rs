//! The GGUF header parser: metadata, tensor infos and the data offset.

use std::collections::{HashMap, HashSet};

use super::cursor::Cursor;
use super::error::{GgufError, Result};
use super::value::{tag, Value};
use super::{Gguf, TensorInfo};
use crate::dtype::GgmlType;

const MAGIC: &[u8; 4] = b"GGUF";
// ggml's own limit is 4, but Wan and HunyuanVideo GGUFs (city96's ComfyUI-GGUF files) carry a
// 5-D conv3d weight (`patch_embedding.weight`) that stable-diffusion.cpp and gguf-py read.
const MAX_DIMS: u32 = 5;
const MAX_NESTING: u32 = 8;
const DEFAULT_ALIGNMENT: u64 = 32;

/// Parses the header of a GGUF file whose first bytes are `prefix` and whose total length is
/// `file_len`. When `prefix` is too short, returns [`GgufError::NeedMore`]: feed more and retry.
pub fn parse_header(prefix: &[u8], file_len: u64) -> Result<Gguf> {
    let mut c = Cursor::new(prefix, file_len);
    let magic: [u8; 4] = c.take(4, &|| "magic".into())?.try_into().unwrap();
    if &magic != MAGIC {
        return Err(GgufError::BadMagic(magic));
    }
    let version = c.u32(&|| "version".into())?;
    if version.swap_bytes() == 2 || version.swap_bytes() == 3 {
        return Err(GgufError::BigEndian);
    }
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion(version));
    }
    let n_tensors = c.u64(&|| "tensor count".into())?;
    let n_kv = c.u64(&|| "metadata count".into())?;
    // Each metadata entry takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info
    // at least 8 + 4 + 4 + 8. Checking first keeps a corrupt count from reserving memory.
    c.require(n_kv.saturating_mul(13), &|| {
        format!("{n_kv} metadata entries")
    })?;
    let mut metadata = Vec::with_capacity(n_kv as usize);
    let mut seen = HashSet::new();
    for i in 0..n_kv {
        let key = c.string(&|| format!("key of metadata entry {i}"))?;
        let ty = c.u32(&|| format!("type of metadata {key:?}"))?;
        let value = read_value(&mut c, ty, &key, 0)?;
        if !seen.insert(key.clone()) {
            return Err(GgufError::Invalid(format!(
                "metadata key {key:?} appears twice"
            )));
        }
        metadata.push((key, value));
    }

    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, v)) => match v.as_u64() {
            Some(a) if a > 0 && a.is_power_of_two() && a <= 1 << 20 => a,
            _ => {
                return Err(GgufError::Invalid(format!(
                    "general.alignment is {v}, expected a power of two"
                )))
            }
        },
    };

    c.require(n_tensors.saturating_mul(24), &|| {
        format!("{n_tensors} tensor infos")
    })?;
    let mut tensors = Vec::with_capacity(n_tensors as usize);
    let mut names = HashSet::new();
    for i in 0..n_tensors {
        let t = read_tensor_info(&mut c, i, alignment)?;
        if !names.insert(t.name.clone()) {
            return Err(GgufError::Invalid(format!(
                "tensor {:?} appears twice",
                t.name
            )));
        }
        tensors.push(t);
    }

    let data_offset = c.pos().div_ceil(alignment) * alignment;
    if !tensors.is_empty() && data_offset > file_len {
        return Err(GgufError::Truncated {
            what: "padding before the tensor data".into(),
            offset: c.pos(),
            needed: data_offset - c.pos(),
            len: file_len,
        });
    }
    let data_len = file_len.saturating_sub(data_offset);
    for t in &tensors {
        let end = t.offset.checked_add(t.n_bytes);
        if end.is_none_or(|e| e > data_len) {
            return Err(GgufError::Truncated {
                what: format!("data of tensor {:?} ({} bytes)", t.name, t.n_bytes),
                offset: data_offset.saturating_add(t.offset),
                needed: t.n_bytes,
                len: file_len,
            });
        }
    }

    let index: HashMap<String, usize> = tensors
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    Ok(Gguf {
        version,
        alignment,
        metadata,
        tensors,
        tensor_index: index,
        data_offset,
        file_len,
    })
}

fn read_value(c: &mut Cursor, ty: u32, key: &str, depth: u32) -> Result<Value> {
    let what = || format!("value of metadata {key:?}");
    Ok(match ty {
        tag::U8 => Value::U8(c.u8(&what)?),
        tag::I8 => Value::I8(c.u8(&what)? as i8),
        tag::U16 => Value::U16(c.u16(&what)?),
        tag::I16 => Value::I16(c.u16(&what)? as i16),
        tag::U32 => Value::U32(c.u32(&what)?),
        tag::I32 => Value::I32(c.u32(&what)? as i32),
        tag::F32 => Value::F32(f32::from_bits(c.u32(&what)?)),
        tag::U64 => Value::U64(c.u64(&what)?),
        tag::I64 => Value::I64(c.u64(&what)? as i64),
        tag::F64 => Value::F64(f64::from_bits(c.u64(&what)?)),
        tag::BOOL => match c.u8(&what)? {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            b => {
                return Err(GgufError::Invalid(format!(
                    "metadata {key:?}: bool byte is {b}, expected 0 or 1"
                )))
            }
        },
        tag::STRING => Value::String(c.string(&what)?),
        tag::ARRAY => {
            if depth >= MAX_NESTING {
                return Err(GgufError::Invalid(format!(
                    "metadata {key:?}: arrays nested deeper than {MAX_NESTING}"
                )));
            }
            let elem = c.u32(&|| format!("element type of array {key:?}"))?;
            let len = c.u64(&|| format!("length of array {key:?}"))?;
            let min = min_size(elem).ok_or_else(|| {
                GgufError::Invalid(format!(
                    "metadata {key:?}: unknown array element type {elem}"
                ))
            })?;
            c.require(len.saturating_mul(min), &|| {
                format!("{len} elements of array {key:?}")
            })?;
            let mut items = Vec::with_capacity(len as usize);
            for _ in 0..len {
                items.push(read_value(c, elem, key, depth + 1)?);
            }
            Value::Array(items)
        }
        other => {
            return Err(GgufError::Invalid(format!(
                "metadata {key:?}: unknown value type {other}"
            )))
        }
    })
}

/// The fewest bytes one value of this type can take on disk.
fn min_size(ty: u32) -> Option<u64> {
    Some(match ty {
        tag::U8 | tag::I8 | tag::BOOL => 1,
        tag::U16 | tag::I16 => 2,
        tag::U32 | tag::I32 | tag::F32 => 4,
        tag::U64 | tag::I64 | tag::F64 | tag::STRING => 8,
        tag::ARRAY => 12,
        _ => return None,
    })
}

fn read_tensor_info(c: &mut Cursor, i: u64, alignment: u64) -> Result<TensorInfo> {
    let name = c.string(&|| format!("name of tensor {i}"))?;
    let n_dims = c.u32(&|| format!("dimension count of tensor {name:?}"))?;
    if n_dims == 0 || n_dims > MAX_DIMS {
        return Err(GgufError::Invalid(format!(
            "tensor {name:?} has {n_dims} dimensions (1 to {MAX_DIMS} allowed)"
        )));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for d in 0..n_dims {
        dims.push(c.u64(&|| format!("dimension {d} of tensor {name:?}"))?);
    }
    let ty_num = c.u32(&|| format!("type of tensor {name:?}"))?;
    let ty = GgmlType::from_u32(ty_num)
        .ok_or_else(|| GgufError::Invalid(format!("tensor {name:?} has unknown type {ty_num}")))?;
    let offset = c.u64(&|| format!("data offset of tensor {name:?}"))?;
    if !offset.is_multiple_of(alignment) {
        return Err(GgufError::Invalid(format!(
            "tensor {name:?} data offset {offset} is not a multiple of the alignment {alignment}"
        )));
    }
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            GgufError::Invalid(format!("tensor {name:?} dimensions {dims:?} overflow"))
        })?;
    if !dims[0].is_multiple_of(ty.block_size() as u64) {
        return Err(GgufError::Invalid(format!(
            "tensor {name:?}: row length {} is not a multiple of the {} block size {}",
            dims[0],
            ty,
            ty.block_size()
        )));
    }
    let n_bytes = ty
        .bytes_for(n_elements)
        .ok_or_else(|| GgufError::Invalid(format!("tensor {name:?} size overflows")))?;
    Ok(TensorInfo {
        name,
        dims,
        ty,
        offset,
        n_elements,
        n_bytes,
    })
}
