//! Choosing a backend by name (`--backend cpu|wgpu`), for the CLI and the server.

use super::{Backend, Result};

/// The backends `create_backend` can make.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// The CPU backend (always available).
    #[default]
    Cpu,
    /// The wgpu backend (any GPU with a Vulkan, Metal, DX12 or GL driver, or lavapipe).
    Wgpu,
}

impl std::str::FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "cpu" => Ok(BackendKind::Cpu),
            "wgpu" | "gpu" => Ok(BackendKind::Wgpu),
            _ => Err(format!("unknown backend {s:?} (expected cpu or wgpu)")),
        }
    }
}

/// Settings that apply to some backends.
#[derive(Clone, Debug, Default)]
pub struct BackendOptions {
    /// CPU threads (0 = one per physical core).
    pub threads: usize,
    /// GPU adapter index (`--gpu-device`, see `weft devices`); None = the default adapter.
    pub gpu_device: Option<usize>,
}

/// Makes a backend. A missing GPU driver is a one-line error suggesting `--backend cpu`.
pub fn create_backend(kind: BackendKind, opts: &BackendOptions) -> Result<Box<dyn Backend>> {
    match kind {
        BackendKind::Cpu => Ok(Box::new(super::cpu::CpuBackend::new(opts.threads))),
        #[cfg(not(target_arch = "wasm32"))]
        BackendKind::Wgpu => {
            let o = super::wgpu::WgpuOptions {
                device_index: opts.gpu_device,
                ..Default::default()
            };
            Ok(Box::new(super::wgpu::WgpuBackend::new(&o)?))
        }
        #[cfg(target_arch = "wasm32")]
        BackendKind::Wgpu => Err(super::BackendError::Unsupported(
            "the wgpu backend is created asynchronously in the browser".into(),
        )),
    }
}
