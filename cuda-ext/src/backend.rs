//! The CUDA backend: executes step graphs with the kernels of `cuda-ext/kernels/`.

use weft_core::backend::{Backend, BackendError, Result};

use crate::devices::CudaDevice;

/// Opens the CUDA backend on `device`.
pub fn open(device: &CudaDevice) -> Result<Box<dyn Backend>> {
    Err(BackendError::Unsupported(format!(
        "the CUDA backend cannot run steps yet (found {}); use --backend wgpu",
        device.name
    )))
}
