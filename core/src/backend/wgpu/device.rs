//! Finding GPU adapters and opening a device on one.
//!
//! The instance honours `WGPU_BACKEND` (e.g. `vulkan`, `gl`) and the other `WGPU_*` variables.
//! Devices are opened with the adapter's own limits (not WebGPU's defaults), so the backend can
//! use e.g. lavapipe's 128 MiB storage bindings; kernels themselves only rely on core WGSL.

#[cfg(not(target_arch = "wasm32"))]
use super::super::{BackendError, Result};
use super::WgpuOptions;

/// What `weft devices` shows about an adapter.
#[derive(Clone, Debug, PartialEq)]
pub struct AdapterSummary {
    /// Index to pass as `--gpu-device`.
    pub index: usize,
    pub name: String,
    /// Graphics API (`Vulkan`, `Metal`, `Dx12`, `Gl`, `BrowserWebGpu`).
    pub backend: String,
    /// `DiscreteGpu`, `IntegratedGpu`, `VirtualGpu`, `Cpu` or `Other`.
    pub device_type: String,
    pub driver: String,
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_storage_buffers_per_shader_stage: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_storage_size: u32,
    /// `shader-f16` is available.
    pub f16: bool,
    /// Subgroup operations are available, with these sizes.
    pub subgroups: Option<(u32, u32)>,
}

/// The one-line message for a machine without any usable adapter.
pub const NO_ADAPTER: &str = "no GPU adapter found (no Vulkan, Metal, DX12 or GL driver); \
install one (on Linux without a GPU: mesa-vulkan-drivers) or use --backend cpu";

pub(super) fn instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env())
}

#[cfg(not(target_arch = "wasm32"))]
pub(super) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    pollster::block_on(f)
}

pub(super) fn summary(index: usize, a: &wgpu::Adapter) -> AdapterSummary {
    let info = a.get_info();
    let limits = a.limits();
    let features = a.features();
    AdapterSummary {
        index,
        name: info.name,
        backend: format!("{:?}", info.backend),
        device_type: format!("{:?}", info.device_type),
        driver: format!("{} {}", info.driver, info.driver_info)
            .trim()
            .to_string(),
        max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
        max_buffer_size: limits.max_buffer_size,
        max_storage_buffers_per_shader_stage: limits.max_storage_buffers_per_shader_stage,
        max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
        max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
        f16: features.contains(wgpu::Features::SHADER_F16),
        subgroups: features
            .contains(wgpu::Features::SUBGROUP)
            .then_some((info.subgroup_min_size, info.subgroup_max_size)),
    }
}

/// Every adapter the instance can reach (native only).
#[cfg(not(target_arch = "wasm32"))]
pub fn list_adapters() -> Vec<AdapterSummary> {
    let inst = instance();
    block_on(inst.enumerate_adapters(wgpu::Backends::all()))
        .iter()
        .enumerate()
        .map(|(i, a)| summary(i, a))
        .collect()
}

/// An open device.
pub(super) struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub summary: AdapterSummary,
    pub limits: wgpu::Limits,
    /// The device was opened with `SUBGROUP` (kernels may use subgroup operations).
    pub subgroups: bool,
    /// The device was opened with `SHADER_F16` (kernels may use the `f16` type).
    pub f16: bool,
    /// Kernels may use the `packed_4x8_integer_dot_product` built-ins.
    pub packed_builtins: bool,
}

/// Whether environment variable `name` is set to something other than empty or `0` (never on
/// wasm32, where there is no environment).
fn env_flag(name: &str) -> bool {
    cfg!(not(target_arch = "wasm32"))
        && std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

/// The optional features to request of an adapter with `features`: `SUBGROUP` when it has it
/// unless `opts.no_subgroups` (or, natively, `WEFT_WGPU_NO_SUBGROUPS`), `SHADER_F16` when it
/// has it unless `opts.no_f16` (or `WEFT_WGPU_NO_F16`).
pub(super) fn wanted_features(features: wgpu::Features, opts: &WgpuOptions) -> wgpu::Features {
    let mut want = wgpu::Features::empty();
    if !opts.no_subgroups && !env_flag("WEFT_WGPU_NO_SUBGROUPS") {
        want |= wgpu::Features::SUBGROUP;
    }
    if !opts.no_f16 && !env_flag("WEFT_WGPU_NO_F16") {
        want |= wgpu::Features::SHADER_F16;
    }
    features & want
}

/// Whether kernels may use WGSL's `packed_4x8_integer_dot_product` built-ins: the WGSL
/// implementation behind `inst` has the language extension (naga natively; the browser's list
/// on wasm) and neither `opts.no_packed_builtins` nor `WEFT_WGPU_NO_PACKED_DOT` says no.
pub(super) fn packed_builtins(inst: &wgpu::Instance, opts: &WgpuOptions) -> bool {
    let has = inst
        .wgsl_language_features()
        .contains(wgpu::WgslLanguageFeatures::Packed4x8IntegerDotProduct);
    has && !opts.no_packed_builtins && !env_flag("WEFT_WGPU_NO_PACKED_DOT")
}

impl Gpu {
    /// The open device, with the features it was opened with; `packed_builtins`: see
    /// [`packed_builtins`].
    pub(super) fn new(
        (device, queue): (wgpu::Device, wgpu::Queue),
        summary: AdapterSummary,
        limits: wgpu::Limits,
        features: wgpu::Features,
        packed_builtins: bool,
    ) -> Self {
        Gpu {
            device,
            queue,
            summary,
            limits,
            subgroups: features.contains(wgpu::Features::SUBGROUP),
            f16: features.contains(wgpu::Features::SHADER_F16),
            packed_builtins,
        }
    }
}

/// Opens adapter `index` (as listed by [`list_adapters`]), or the default high-performance one,
/// with the features of [`wanted_features`].
#[cfg(not(target_arch = "wasm32"))]
pub(super) fn open(index: Option<usize>, opts: &WgpuOptions) -> Result<Gpu> {
    let inst = instance();
    let (i, adapter) = match index {
        Some(i) => {
            let all = block_on(inst.enumerate_adapters(wgpu::Backends::all()));
            let n = all.len();
            if n == 0 {
                return Err(BackendError::Unsupported(NO_ADAPTER.into()));
            }
            let a = all.into_iter().nth(i).ok_or_else(|| {
                BackendError::Unsupported(format!(
                    "--gpu-device {i}: there are only {n} adapters (see `weft devices`)"
                ))
            })?;
            (i, a)
        }
        None => {
            let opts = wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            };
            let a = block_on(inst.request_adapter(&opts))
                .map_err(|_| BackendError::Unsupported(NO_ADAPTER.into()))?;
            (0, a)
        }
    };
    let summary = summary(i, &adapter);
    let limits = adapter.limits();
    let features = wanted_features(adapter.features(), opts);
    let desc = wgpu::DeviceDescriptor {
        label: Some("weft"),
        required_features: features,
        required_limits: limits.clone(),
        ..Default::default()
    };
    let opened = block_on(adapter.request_device(&desc)).map_err(|e| {
        BackendError::Unsupported(format!(
            "cannot open a device on {}: {e}; try --backend cpu",
            summary.name
        ))
    })?;
    let packed = packed_builtins(&inst, opts);
    Ok(Gpu::new(opened, summary, limits, features, packed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wgpu::Features as F;

    #[test]
    fn wanted_features_are_those_offered_and_not_turned_off() {
        let offered = F::SUBGROUP | F::SHADER_F16 | F::TIMESTAMP_QUERY;
        let opts = |no_subgroups, no_f16| WgpuOptions {
            no_subgroups,
            no_f16,
            ..Default::default()
        };
        // Options only ever remove (the environment may remove more, never add).
        assert_eq!(wanted_features(offered, &opts(true, true)), F::empty());
        assert!(!wanted_features(offered, &opts(true, false)).contains(F::SUBGROUP));
        assert!(!wanted_features(offered, &opts(false, true)).contains(F::SHADER_F16));
        // Nothing the adapter lacks, nothing beyond the two.
        assert_eq!(wanted_features(F::empty(), &opts(false, false)), F::empty());
        assert!(
            (wanted_features(offered, &opts(false, false)) - (F::SUBGROUP | F::SHADER_F16))
                .is_empty()
        );
        if !env_flag("WEFT_WGPU_NO_SUBGROUPS") && !env_flag("WEFT_WGPU_NO_F16") {
            assert_eq!(
                wanted_features(offered, &opts(false, false)),
                F::SUBGROUP | F::SHADER_F16
            );
        }
    }
}
