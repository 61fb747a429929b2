//! Reading a diffusers component folder (config.json and safetensors weights) for the f32
//! reference models of this module: one error type and one reader for all of them.

use std::path::{Path, PathBuf};

use safetensors::SafeTensors;

use crate::gguf::ModelFile;
use crate::hf::decoder::float_type;
use crate::quant;

/// What can go wrong loading or running one of the diffusion components.
#[derive(Debug, thiserror::Error)]
pub enum ModelFileError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: {message}")]
    Config { path: String, message: String },
    #[error("{path}: {message}")]
    Weights { path: String, message: String },
    #[error("{0}")]
    Input(String),
}

/// A config.json as JSON: an `Io` error when it cannot be read, a `Config` one when it is not
/// JSON.
pub(super) fn read_config(path: &Path) -> Result<serde_json::Value, ModelFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| ModelFileError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| ModelFileError::Config {
        path: path.display().to_string(),
        message: format!("not JSON: {e}"),
    })
}

/// A safetensors file's bytes, read whole (these components are small, or read once).
pub(super) struct WeightFile {
    bytes: Vec<u8>,
    path: PathBuf,
}

impl WeightFile {
    pub(super) fn read(path: &Path) -> Result<Self, ModelFileError> {
        let bytes = std::fs::read(path).map_err(|e| ModelFileError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Ok(WeightFile {
            bytes,
            path: path.to_path_buf(),
        })
    }

    pub(super) fn tensors(&self) -> Result<Weights<'_>, ModelFileError> {
        let file = SafeTensors::deserialize(&self.bytes).map_err(|e| ModelFileError::Weights {
            path: self.path.display().to_string(),
            message: format!("not a valid safetensors file: {e}"),
        })?;
        Ok(Weights {
            source: Source::Safetensors(file),
            path: &self.path,
        })
    }
}

/// Renames a diffusers tensor name to the name a file stores it under (None: not stored).
pub(super) type Rename<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Where [`Weights`] reads from.
enum Source<'a> {
    /// A diffusers safetensors file, under diffusers' names.
    Safetensors(SafeTensors<'a>),
    /// A GGUF file (or a safetensors file seen as one) under other names: every diffusers
    /// name goes through the rename first, so one loader reads both layouts.
    Renamed(&'a ModelFile, Rename<'a>),
}

/// The file's tensors, widened to f32 and checked against the shapes the config implies.
pub(super) struct Weights<'a> {
    source: Source<'a>,
    path: &'a Path,
}

impl<'a> Weights<'a> {
    /// The tensors of `file` (read from `path`), asked for by diffusers' names and found under
    /// the names `rename` gives; any GGML type `quant` can widen (quantized ones included).
    pub(super) fn renamed(file: &'a ModelFile, path: &'a Path, rename: Rename<'a>) -> Self {
        Weights {
            source: Source::Renamed(file, rename),
            path,
        }
    }

    /// A `Weights` error naming the file.
    pub(super) fn error(&self, message: String) -> ModelFileError {
        ModelFileError::Weights {
            path: self.path.display().to_string(),
            message,
        }
    }

    /// Tensor `name`, which must have `shape`, as f32 (from F32, F16 or BF16).
    pub(super) fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, ModelFileError> {
        let file = match &self.source {
            Source::Safetensors(file) => file,
            Source::Renamed(file, rename) => return self.get_renamed(file, *rename, name, shape),
        };
        let t = file
            .tensor(name)
            .map_err(|_| self.error(format!("tensor {name} is missing")))?;
        if t.shape() != shape {
            return Err(self.error(format!(
                "tensor {name} has shape {:?}, the config implies {shape:?}",
                t.shape()
            )));
        }
        let ty = float_type(t.dtype()).ok_or_else(|| {
            self.error(format!(
                "tensor {name} is {:?}; only F32, F16 and BF16 are supported",
                t.dtype()
            ))
        })?;
        let n = shape.iter().product();
        quant::dequantize_to_vec(ty, t.data(), n)
            .map_err(|e| self.error(format!("tensor {name}: {e}")))
    }

    fn get_renamed(
        &self,
        file: &ModelFile,
        rename: Rename<'_>,
        name: &str,
        shape: &[usize],
    ) -> Result<Vec<f32>, ModelFileError> {
        let stored = rename(name)
            .ok_or_else(|| self.error(format!("tensor {name} has no name in this layout")))?;
        let (t, data) = file
            .tensor(&stored)
            .ok_or_else(|| self.error(format!("tensor {stored} is missing")))?;
        // GGUF dims are innermost first; shapes here are PyTorch's (outermost first).
        let dims: Vec<usize> = t.dims.iter().rev().map(|&d| d as usize).collect();
        if dims != shape {
            return Err(self.error(format!(
                "tensor {stored} has shape {dims:?}, the config implies {shape:?}"
            )));
        }
        let n = shape.iter().product();
        quant::dequantize_to_vec(t.ty, data, n)
            .map_err(|e| self.error(format!("tensor {stored}: {e}")))
    }
}
