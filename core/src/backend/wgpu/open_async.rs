//! Opening the backend without blocking (the browser, where WebGPU's adapter and device
//! requests are promises).

use super::device::{packed_builtins, summary, wanted_features, Gpu, NO_ADAPTER};
use super::{WgpuBackend, WgpuOptions};
use crate::backend::{BackendError, Result};

/// The one-line message when the browser exposes no WebGPU adapter.
pub const NO_WEBGPU: &str = "WebGPU is not available in this browser (no navigator.gpu or no \
adapter); use backend \"cpu\" or \"auto\"";

impl WgpuBackend {
    /// Opens the default adapter asynchronously (`opts.device_index` is ignored: browsers
    /// expose a single adapter).
    pub async fn new_async(opts: &WgpuOptions) -> Result<Self> {
        let inst = super::device::instance();
        let ro = wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
            apply_limit_buckets: false,
        };
        let adapter = inst.request_adapter(&ro).await.map_err(|_| {
            BackendError::Unsupported(if cfg!(target_arch = "wasm32") {
                NO_WEBGPU.into()
            } else {
                NO_ADAPTER.into()
            })
        })?;
        let summary = summary(0, &adapter);
        let limits = adapter.limits();
        let features = wanted_features(adapter.features(), opts);
        let desc = wgpu::DeviceDescriptor {
            label: Some("weft"),
            required_features: features,
            required_limits: limits.clone(),
            ..Default::default()
        };
        // The browser's subgroups, which wgpu 30 does not request itself (see web_features).
        #[cfg(target_arch = "wasm32")]
        let extra = (wanted_features(wgpu::Features::SUBGROUP, opts) != wgpu::Features::empty())
            .then(|| super::web_features::ExtraFeatures::install(&["subgroups"]));
        let opened = adapter.request_device(&desc).await;
        #[cfg(target_arch = "wasm32")]
        drop(extra);
        let opened = opened.map_err(|e| {
            BackendError::Unsupported(format!(
                "cannot open a WebGPU device on {}: {e}",
                summary.name
            ))
        })?;
        #[cfg(target_arch = "wasm32")]
        let (features, summary) =
            super::web_features::with_subgroups(&adapter, &opened.0, features, summary);
        Ok(Self::with_gpu(
            Gpu::new(
                opened,
                summary,
                limits,
                features,
                packed_builtins(&inst, opts),
            ),
            opts,
        ))
    }
}
