//! weft-cuda: Weft's CUDA backend, an extension crate.
//!
//! It implements core's [`BackendFactory`](weft_core::backend::BackendFactory) and is
//! registered by the program that assembles Weft (`weft_server::backends`); core never names it.
//!
//! - The CUDA driver (`libcuda.so.1`) and NVRTC (`libnvrtc.so.12`) are loaded at run time
//!   through cudarc's dynamic loading, so the binary builds and starts on machines without CUDA.
//!   [`probe`] looks for the driver before anything calls into it (cudarc panics on a missing
//!   library); without one, `--backend cuda` fails with [`NO_DRIVER`], one line.
//! - Kernels are CUDA C sources in `cuda-ext/kernels/`, one file per kernel family
//!   ([`kernels::SOURCES`]), compiled at run time by NVRTC for the device's architecture and
//!   cached per device by architecture and source hash ([`nvrtc`]).
//! - [`CudaBackend`] runs a step graph op by op with those kernels, decode steps as CUDA graphs
//!   ([`graphs`]). It has never been run: it was written without a GPU (docs/cuda.md).

pub mod devices;
pub mod graphs;
pub mod kernels;
pub mod launch;

pub mod nvrtc;

mod backend;
mod factory;

pub use backend::CudaBackend;
pub use devices::{list_devices, probe, CudaDevice, NO_DRIVER};
pub use factory::CudaFactory;
