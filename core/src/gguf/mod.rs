//! GGUF (versions 2 and 3): metadata, tensor infos, and access to tensor bytes in place.
//!
//! [`parse_header`] works on any prefix of a file, so a browser can feed chunks until it stops
//! answering [`GgufError::NeedMore`]. [`ModelFile`] pairs a parsed header with the file's bytes
//! (a memory map natively, an owned buffer anywhere).

mod cursor;
mod error;
mod file;
mod parse;
mod value;
mod write;

use std::collections::HashMap;

pub use error::{GgufError, Result};
pub use file::{ModelBytes, ModelFile};
pub use parse::parse_header;
pub use value::Value;
pub use write::{gguf_header, write_gguf, TensorHeader, TensorToWrite};

use crate::dtype::GgmlType;

/// One tensor's description. `dims[0]` is the innermost (contiguous) dimension.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Offset from the start of the data section.
    pub offset: u64,
    pub n_elements: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Number of rows: the product of every dimension but the first.
    pub fn n_rows(&self) -> u64 {
        self.dims[1..].iter().product()
    }
}

/// A parsed GGUF header.
#[derive(Clone, Debug)]
pub struct Gguf {
    pub version: u32,
    pub alignment: u64,
    /// Metadata in file order.
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    /// Absolute file offset of the data section.
    pub data_offset: u64,
    pub file_len: u64,
}

impl Gguf {
    /// A header made in memory rather than parsed (e.g. for a safetensors file, whose tensors
    /// are described here under their GGUF names). Tensor offsets are taken from
    /// `data_offset`, as in a parsed file.
    pub fn from_parts(
        metadata: Vec<(String, Value)>,
        tensors: Vec<TensorInfo>,
        data_offset: u64,
        file_len: u64,
    ) -> Self {
        let tensor_index = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Gguf {
            version: 3,
            alignment: 32,
            metadata,
            tensors,
            tensor_index,
            data_offset,
            file_len,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }

    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.as_u64()
    }

    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key)?.as_f64()
    }

    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }

    pub fn get_array(&self, key: &str) -> Option<&[Value]> {
        self.get(key)?.as_array()
    }

    /// `general.architecture`, e.g. `llama`, `qwen2`, `gemma3`.
    pub fn architecture(&self) -> Option<&str> {
        self.get_str("general.architecture")
    }

    /// An architecture-scoped key: `arch_key("context_length")` reads `<arch>.context_length`.
    pub fn arch_key(&self, suffix: &str) -> Option<&Value> {
        self.get(&format!("{}.{suffix}", self.architecture()?))
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// Absolute byte range of a tensor's data in the file.
    pub fn tensor_range(&self, t: &TensorInfo) -> std::ops::Range<u64> {
        let start = self.data_offset + t.offset;
        start..start + t.n_bytes
    }
}
