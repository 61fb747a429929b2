//! Browser WebGPU features wgpu 30 does not pass through. Its WebGPU backend's feature table
//! (`FEATURES_MAPPING` in wgpu/src/backend/webgpu.rs) lacks `subgroups` (gfx-rs/wgpu#10146), so
//! `Adapter::features` never lists `SUBGROUP` and `request_device` never asks the browser for
//! it. While the device is requested, [`ExtraFeatures`] wraps `GPUAdapter.prototype.
//! requestDevice` to add the named features the adapter offers; [`device_has`] then asks the
//! browser's device whether it holds one. wgpu hands WGSL to the browser unvalidated on this
//! backend, so modules with `enable subgroups;` compile wherever the device has the feature.
//! The snippet is a static module (no `eval`), so pages with a strict CSP keep working.

use wasm_bindgen::prelude::*;

use super::device::AdapterSummary;

#[wasm_bindgen(inline_js = r#"
export function weft_add_required_features(extra) {
  const cls = globalThis.GPUAdapter;
  if (typeof cls !== 'function' || typeof cls.prototype.requestDevice !== 'function') {
    return null;
  }
  const original = cls.prototype.requestDevice;
  cls.prototype.requestDevice = function (desc) {
    const d = Object.assign({}, desc);
    const req = Array.from((desc && desc.requiredFeatures) || []);
    for (const f of extra) {
      if (this.features.has(f) && !req.includes(f)) req.push(f);
    }
    d.requiredFeatures = req;
    return original.call(this, d);
  };
  return () => { cls.prototype.requestDevice = original; };
}

export function weft_device_has(device, name) {
  return !!(device && device.features && device.features.has(name));
}
"#)]
extern "C" {
    fn weft_add_required_features(extra: js_sys::Array) -> JsValue;
    fn weft_device_has(device: &JsValue, name: &str) -> bool;
}

/// While alive, devices requested from any adapter also require `names` where the adapter
/// offers them (dropping it restores `requestDevice`).
pub(super) struct ExtraFeatures {
    restore: Option<js_sys::Function>,
}

impl ExtraFeatures {
    pub fn install(names: &[&str]) -> Self {
        let extra: js_sys::Array = names.iter().map(|n| JsValue::from_str(n)).collect();
        let restore = weft_add_required_features(extra).dyn_into().ok();
        ExtraFeatures { restore }
    }
}

impl Drop for ExtraFeatures {
    fn drop(&mut self) {
        if let Some(f) = self.restore.take() {
            let _ = f.call0(&JsValue::NULL);
        }
    }
}

/// Whether the browser's device behind `device` holds WebGPU feature `name`.
pub(super) fn device_has(device: &wgpu::Device, name: &str) -> bool {
    device
        .as_webgpu()
        .is_some_and(|d| weft_device_has(d.as_ref(), name))
}

/// `features` and `summary` of a device opened on `adapter`, with `SUBGROUP` and the
/// adapter's subgroup sizes added when the browser's device holds `subgroups`.
pub(super) fn with_subgroups(
    adapter: &wgpu::Adapter,
    device: &wgpu::Device,
    mut features: wgpu::Features,
    mut summary: AdapterSummary,
) -> (wgpu::Features, AdapterSummary) {
    if device_has(device, "subgroups") {
        features |= wgpu::Features::SUBGROUP;
        let info = adapter.get_info();
        summary.subgroups = Some((info.subgroup_min_size, info.subgroup_max_size));
    }
    (features, summary)
}
