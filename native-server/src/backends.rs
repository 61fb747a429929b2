//! The backends this `weft` binary was built with, in the order `--backend auto` tries them.
//!
//! Core defines what a backend is; this program decides which ones it offers. Adding a backend
//! is a crate implementing `weft_core::backend::BackendFactory` plus one `register` line here.

use weft_core::backend::{BackendRegistry, CpuFactory, WgpuFactory};

/// cuda (NVIDIA GPUs, when a driver is there), then wgpu (any hardware GPU), then the CPU.
pub fn backends() -> BackendRegistry {
    BackendRegistry::new()
        .register(weft_cuda::CudaFactory)
        .register(WgpuFactory)
        .register(CpuFactory)
}
