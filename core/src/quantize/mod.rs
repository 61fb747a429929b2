//! Whole-model quantization: a GGUF file in, a GGUF file of another type out, as llama.cpp's
//! `llama-quantize` makes it (same tensor types per tensor, same order, same metadata, same
//! bytes where the quantizers allow; see `docs/quantize.md` for how close it is).
//!
//! [`plan`] decides every tensor's type ([`rules`]) and refuses what cannot be done before a
//! byte is written: an already-quantized source without `allow_requantize`, a type that cannot
//! be read or written. [`quantize_model`] then streams the new file to a writer, converting
//! tensors slab by slab on `threads` threads, and reports progress after each slab (the
//! callback returns `false` to cancel).
//!
//! Files: `ftype.rs` (the file types and their names), `rules.rs` (which tensor gets which
//! type), `run.rs` (the conversion and the writing).

mod ftype;
pub mod rules;
mod run;

pub use ftype::{supported_list, FileType, UnknownFileType};
pub use run::{plan, quantize_model, Plan, PlannedTensor};

use crate::dtype::GgmlType;

/// What to make.
#[derive(Clone, Debug)]
pub struct QuantizeOptions {
    pub ftype: FileType,
    /// Convert tensors that are already in a quantized block format (lossy twice over);
    /// llama.cpp refuses without `--allow-requantize` too.
    pub allow_requantize: bool,
    /// Every quantizable tensor gets the default type, without the mixes' upgrades.
    pub pure: bool,
    /// Worker threads (at least 1).
    pub threads: usize,
}

impl QuantizeOptions {
    /// `ftype` with llama.cpp's defaults: no requantization, mixes on, every core.
    pub fn new(ftype: FileType) -> Self {
        QuantizeOptions {
            ftype,
            allow_requantize: false,
            pure: false,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// How far a quantization is, after each slab.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    pub tensors_done: usize,
    pub tensors_total: usize,
    /// Bytes of the source's tensor data processed.
    pub bytes_done: u64,
    pub bytes_total: u64,
    /// The tensor being converted.
    pub tensor: String,
}

/// What a finished quantization made.
#[derive(Clone, Debug)]
pub struct Summary {
    pub tensors: usize,
    /// Tensor data bytes read and written.
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Bytes of the whole output file.
    pub file_bytes: u64,
}

/// Why a quantization failed.
#[derive(Debug, thiserror::Error)]
pub enum QuantizeError {
    #[error(
        "tensor {tensor} is already quantized ({from}); requantizing loses accuracy twice, \
         pass allow_requantize (--allow-requantize) to do it anyway"
    )]
    Requantize { tensor: String, from: GgmlType },
    #[error("tensor {tensor} has type {ty}, which cannot be converted")]
    CannotRead { tensor: String, ty: GgmlType },
    #[error("writing {ty} is not supported (tensor {tensor})")]
    CannotWrite { tensor: String, ty: GgmlType },
    #[error("tensor {tensor} has {len} bytes, expected {expected} for its shape and type")]
    BadTensor {
        tensor: String,
        len: usize,
        expected: u64,
    },
    #[error("cancelled")]
    Cancelled,
    #[error("write failed: {0}")]
    Io(#[from] std::io::Error),
}
