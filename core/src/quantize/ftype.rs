//! The target of a quantization: a file type as llama.cpp names and numbers them.

use std::fmt;
use std::str::FromStr;

use crate::dtype::GgmlType;

/// A model file type (`general.file_type`): one tensor type for most weights, or one of
/// llama.cpp's mixes that give some tensors more bits. Numbers are llama.cpp's `LLAMA_FTYPE_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum FileType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q4_K_S,
    Q4_K_M,
    Q5_K_S,
    Q5_K_M,
    Q6_K,
}

impl FileType {
    /// Every file type, in the order `weft quantize --help` lists them.
    pub const ALL: [FileType; 13] = [
        FileType::F32,
        FileType::F16,
        FileType::BF16,
        FileType::Q8_0,
        FileType::Q6_K,
        FileType::Q5_K_M,
        FileType::Q5_K_S,
        FileType::Q5_1,
        FileType::Q5_0,
        FileType::Q4_K_M,
        FileType::Q4_K_S,
        FileType::Q4_1,
        FileType::Q4_0,
    ];

    /// llama.cpp's `LLAMA_FTYPE_MOSTLY_*` number, written to `general.file_type`.
    pub fn llama_number(self) -> u32 {
        use FileType::*;
        match self {
            F32 => 0,
            F16 => 1,
            Q4_0 => 2,
            Q4_1 => 3,
            Q8_0 => 7,
            Q5_0 => 8,
            Q5_1 => 9,
            Q4_K_S => 14,
            Q4_K_M => 15,
            Q5_K_S => 16,
            Q5_K_M => 17,
            Q6_K => 18,
            BF16 => 32,
        }
    }

    /// The tensor type most weights get.
    pub fn default_type(self) -> GgmlType {
        use FileType::*;
        match self {
            F32 => GgmlType::F32,
            F16 => GgmlType::F16,
            BF16 => GgmlType::BF16,
            Q4_0 => GgmlType::Q4_0,
            Q4_1 => GgmlType::Q4_1,
            Q5_0 => GgmlType::Q5_0,
            Q5_1 => GgmlType::Q5_1,
            Q8_0 => GgmlType::Q8_0,
            Q4_K_S | Q4_K_M => GgmlType::Q4_K,
            Q5_K_S | Q5_K_M => GgmlType::Q5_K,
            Q6_K => GgmlType::Q6_K,
        }
    }

    /// The canonical name (`Q4_K_M`, `F16`, ...).
    pub fn name(self) -> &'static str {
        use FileType::*;
        match self {
            F32 => "F32",
            F16 => "F16",
            BF16 => "BF16",
            Q4_0 => "Q4_0",
            Q4_1 => "Q4_1",
            Q5_0 => "Q5_0",
            Q5_1 => "Q5_1",
            Q8_0 => "Q8_0",
            Q4_K_S => "Q4_K_S",
            Q4_K_M => "Q4_K_M",
            Q5_K_S => "Q5_K_S",
            Q5_K_M => "Q5_K_M",
            Q6_K => "Q6_K",
        }
    }

    /// Whether the default type is a quantized block format (not F32/F16/BF16): only then
    /// do the per-tensor rules apply, and only then is a quantized source "requantized".
    pub fn is_quantized(self) -> bool {
        !matches!(self, FileType::F32 | FileType::F16 | FileType::BF16)
    }
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no supported file type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported quantization type {0:?}; supported: {list}", list = supported_list())]
pub struct UnknownFileType(pub String);

/// The supported names, comma-separated, for messages.
pub fn supported_list() -> String {
    let mut v: Vec<&str> = FileType::ALL.iter().map(|t| t.name()).collect();
    v.extend(["Q4_K (= Q4_K_M)", "Q5_K (= Q5_K_M)"]);
    v.join(", ")
}

impl FromStr for FileType {
    type Err = UnknownFileType;

    /// Case-insensitive, as llama-quantize's names are; `Q4_K` and `Q5_K` are its aliases of
    /// the `_M` mixes.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let up = s.trim().to_ascii_uppercase();
        let alias = match up.as_str() {
            "Q4_K" => Some(FileType::Q4_K_M),
            "Q5_K" => Some(FileType::Q5_K_M),
            _ => None,
        };
        alias
            .or_else(|| FileType::ALL.iter().copied().find(|t| t.name() == up))
            .ok_or_else(|| UnknownFileType(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_case_insensitive() {
        assert_eq!("q8_0".parse::<FileType>().unwrap(), FileType::Q8_0);
        assert_eq!("Q4_k_m".parse::<FileType>().unwrap(), FileType::Q4_K_M);
        assert_eq!("q4_k".parse::<FileType>().unwrap(), FileType::Q4_K_M);
        assert_eq!("f16".parse::<FileType>().unwrap(), FileType::F16);
        let e = "q3_k_xl".parse::<FileType>().unwrap_err().to_string();
        assert!(
            e.contains("unsupported quantization type \"q3_k_xl\""),
            "{e}"
        );
        assert!(e.contains("Q4_K_M"), "{e}");
        for t in FileType::ALL {
            assert_eq!(t.name().parse::<FileType>().unwrap(), t);
        }
    }
}
