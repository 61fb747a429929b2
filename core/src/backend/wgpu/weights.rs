//! Weights in GPU memory: uploaded once, in their file format, split by rows into chunks that
//! each fit one storage binding.

use super::pipelines::quant_name;
use crate::backend::{BackendError, Result};
use crate::dtype::GgmlType;
use crate::quant;

/// Rows `row0 .. row0 + rows` of a weight, in one buffer.
pub(super) struct Chunk {
    pub buf: wgpu::Buffer,
    pub row0: usize,
    pub rows: usize,
}

/// A weight as the kernels see it.
pub(super) struct GpuWeight {
    pub name: String,
    /// Type of the bytes on the GPU (the file's type, or F32 when converted at load).
    pub ty: GgmlType,
    /// Type in the file (decides how activations are quantized for products, as on the CPU).
    pub file_ty: GgmlType,
    pub cols: usize,
    pub rows: usize,
    pub row_bytes: usize,
    pub chunks: Vec<Chunk>,
    /// The values of a vector (one row), also kept on the host for tables computed there.
    pub host: Option<Vec<f32>>,
}

fn bad(name: &str, message: String) -> BackendError {
    BackendError::BadTensor {
        name: name.to_string(),
        message,
    }
}

/// A storage buffer holding `data`, padded to whole words plus one spare word (kernels read
/// unaligned words that may straddle the end).
pub(super) fn storage_with(device: &wgpu::Device, label: &str, data: &[u8]) -> wgpu::Buffer {
    let size = (data.len() as u64).div_ceil(4) * 4 + 4;
    let buf = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: true,
    });
    {
        let mut view = buf
            .slice(..)
            .get_mapped_range_mut()
            .expect("a buffer mapped at creation is mappable");
        view.slice(..data.len()).copy_from_slice(data);
    }
    buf.unmap();
    buf
}

impl GpuWeight {
    /// Uploads a tensor. Vectors (one row: norms, biases) and types without a kernel
    /// dequantizer are converted to f32 first.
    pub fn upload(
        device: &wgpu::Device,
        name: &str,
        ty: GgmlType,
        cols: usize,
        rows: usize,
        bytes: &[u8],
        max_chunk: u64,
    ) -> Result<Self> {
        let file_row = ty
            .bytes_for(cols as u64)
            .ok_or_else(|| bad(name, format!("a row of {cols} is not whole {ty} blocks")))?
            as usize;
        if bytes.len() < file_row * rows {
            return Err(bad(name, "data is shorter than its shape".into()));
        }
        let bytes = &bytes[..file_row * rows];
        let file_ty = ty;
        let convert = rows == 1 || quant_name(ty).is_none() || !cols.is_multiple_of(32);
        let converted: Vec<u8>;
        let mut host = None;
        let (ty, row_bytes, data) = if convert {
            if !quant::is_supported(ty) {
                return Err(bad(name, format!("type {ty} is not supported")));
            }
            if rows > 1 && !cols.is_multiple_of(32) {
                return Err(bad(
                    name,
                    format!("rows of {cols} elements are not a multiple of 32"),
                ));
            }
            let mut f = vec![0f32; cols * rows];
            quant::dequantize(ty, bytes, &mut f).map_err(|e| bad(name, format!("{e}")))?;
            converted = bytemuck::cast_slice(&f).to_vec();
            if rows == 1 {
                host = Some(f);
            }
            (GgmlType::F32, cols * 4, &converted[..])
        } else {
            (ty, file_row, bytes)
        };
        if row_bytes as u64 > max_chunk {
            return Err(bad(
                name,
                format!("one row ({row_bytes} bytes) exceeds the adapter's storage binding"),
            ));
        }
        let per_chunk = (max_chunk as usize / row_bytes).max(1);
        let mut chunks = Vec::new();
        let mut row0 = 0;
        while row0 < rows {
            let n = per_chunk.min(rows - row0);
            let buf = storage_with(
                device,
                name,
                &data[row0 * row_bytes..(row0 + n) * row_bytes],
            );
            chunks.push(Chunk { buf, row0, rows: n });
            row0 += n;
        }
        Ok(GpuWeight {
            name: name.to_string(),
            ty,
            file_ty,
            cols,
            rows,
            row_bytes,
            chunks,
            host,
        })
    }
}
