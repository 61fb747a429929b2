use std::ops::Deref;

#[cfg(not(target_arch = "wasm32"))]
use super::error::GgufError;
use super::error::Result;
use super::{parse_header, Gguf, TensorInfo};

/// The bytes of a whole model file.
pub enum ModelBytes {
    /// Memory-mapped: weights are used in place, never copied.
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(memmap2::Mmap),
    /// Held in memory (tests, the browser).
    Owned(Vec<u8>),
}

impl Deref for ModelBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            ModelBytes::Mapped(m) => m,
            ModelBytes::Owned(v) => v,
        }
    }
}

/// A parsed GGUF header together with the file's bytes.
pub struct ModelFile {
    pub gguf: Gguf,
    bytes: ModelBytes,
}

impl ModelFile {
    /// Memory-maps and parses a file.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Self> {
        let path = path.as_ref();
        let io = |e: std::io::Error| GgufError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let file = std::fs::File::open(path).map_err(io)?;
        if file.metadata().map_err(io)?.is_dir() {
            return Err(GgufError::Io {
                path: path.display().to_string(),
                message: "is a directory, expected a .gguf file".into(),
            });
        }
        // SAFETY: the map is read-only; a file truncated underneath us by another process is
        // outside what any reader can defend against, as with every mmap-based loader.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        Self::from_bytes(ModelBytes::Mapped(map))
    }

    /// Parses a file already in memory.
    pub fn from_bytes(bytes: ModelBytes) -> Result<Self> {
        let gguf = parse_header(&bytes, bytes.len() as u64)?;
        Ok(ModelFile { gguf, bytes })
    }

    /// Pairs a header made in memory ([`Gguf::from_parts`]) with the bytes it describes.
    pub fn from_header(gguf: Gguf, bytes: ModelBytes) -> Self {
        ModelFile { gguf, bytes }
    }

    pub fn from_vec(bytes: Vec<u8>) -> Result<Self> {
        Self::from_bytes(ModelBytes::Owned(bytes))
    }

    /// The raw bytes of a tensor, in its on-disk (possibly quantized) layout.
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let r = self.gguf.tensor_range(t);
        &self.bytes[r.start as usize..r.end as usize]
    }

    /// Looks a tensor up by name and returns its info and bytes.
    pub fn tensor(&self, name: &str) -> Option<(&TensorInfo, &[u8])> {
        let t = self.gguf.tensor(name)?;
        Some((t, self.tensor_data(t)))
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}
