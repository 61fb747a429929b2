//! The key/value cache in GPU memory: per layer, one key and one value buffer of
//! `[n_seq][capacity][n_kv_head · head_dim]` elements (f16 pairs packed in u32 words, or f32).

use crate::backend::{BackendError, KvCacheSpec, KvDtype, KvLayerSpec, Result};

pub(super) struct GpuLayer {
    pub spec: KvLayerSpec,
    pub k: wgpu::Buffer,
    pub v: wgpu::Buffer,
}

pub(super) struct GpuKvCache {
    pub n_seq: usize,
    pub dtype: KvDtype,
    pub layers: Vec<GpuLayer>,
}

impl GpuKvCache {
    pub fn new(device: &wgpu::Device, spec: &KvCacheSpec, max_binding: u64) -> Result<Self> {
        if spec.n_seq == 0 {
            return Err(BackendError::Unsupported(
                "a KV cache needs at least one sequence slot".into(),
            ));
        }
        let elem = match spec.dtype {
            KvDtype::F16 => 2u64,
            KvDtype::F32 => 4,
        };
        let mut layers = Vec::with_capacity(spec.layers.len());
        for (i, l) in spec.layers.iter().enumerate() {
            let wk = (l.n_kv_head * l.head_dim_k) as u64;
            let wv = (l.n_kv_head * l.head_dim_v) as u64;
            if !wk.is_multiple_of(2) || !wv.is_multiple_of(2) {
                return Err(BackendError::Unsupported(format!(
                    "layer {i}: key/value widths must be even for the GPU cache"
                )));
            }
            let slots = (spec.n_seq * l.capacity) as u64;
            let make = |w: u64, what: &str| -> Result<wgpu::Buffer> {
                let size = (slots * w * elem).max(4);
                if size > max_binding {
                    return Err(BackendError::Unsupported(format!(
                        "layer {i}: the {what} cache needs {size} bytes, more than one GPU binding \
                         ({max_binding}); use a smaller --ctx or fewer sequences"
                    )));
                }
                Ok(device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(what),
                    size,
                    usage: wgpu::BufferUsages::STORAGE,
                    mapped_at_creation: false,
                }))
            };
            layers.push(GpuLayer {
                spec: l.clone(),
                k: make(wk, "key")?,
                v: make(wv, "value")?,
            });
        }
        Ok(GpuKvCache {
            n_seq: spec.n_seq,
            dtype: spec.dtype,
            layers,
        })
    }
}
