use thiserror::Error;

use crate::dtype::GgmlType;

/// Why a quantize or dequantize call was refused. Each variant says what was wrong.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum QuantError {
    #[error("dequantizing {0} is not supported")]
    DequantUnsupported(GgmlType),
    #[error("quantizing to {0} is not supported")]
    QuantUnsupported(GgmlType),
    #[error("{n} elements is not a whole number of {ty} blocks ({block} elements each)")]
    NotWholeBlocks {
        ty: GgmlType,
        n: usize,
        block: usize,
    },
    #[error("{n} {ty} elements take {expected} bytes, but the buffer holds {got}")]
    WrongByteLen {
        ty: GgmlType,
        n: usize,
        expected: usize,
        got: usize,
    },
}
