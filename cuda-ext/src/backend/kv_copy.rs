//! A cached prompt prefix copied from one sequence slot to another
//! ([`weft_core::backend::Backend::copy_prefix`]), as device-to-device copies on the stream,
//! so they run after every step already launched and before any later one.

use cudarc::driver::{result, CudaStream, DevicePtr};
use weft_core::backend::{copy_plan, KvDtype, Result};

use super::{err, DevCache};

/// Copies sequence `src`'s positions `0..n` into `dst` in every layer of `cache`.
pub(super) fn copy_prefix(
    stream: &CudaStream,
    cache: &DevCache,
    src: u32,
    dst: u32,
    n: usize,
) -> Result<()> {
    let spec = &cache.spec;
    let runs = copy_plan(&spec.layers, spec.n_seq, &cache.tables, src, dst, n)?;
    let elem = match spec.dtype {
        KvDtype::F16 => 2,
        KvDtype::F32 => 4,
    };
    for ((l, dev), runs) in spec.layers.iter().zip(&cache.layers).zip(runs) {
        let wk = l.n_kv_head * l.head_dim_k * elem;
        let wv = l.n_kv_head * l.head_dim_v * elem;
        let (k, _k_sync) = dev.k.device_ptr(stream);
        let (v, _v_sync) = dev.v.device_ptr(stream);
        for r in runs {
            // Source and destination runs are distinct slots of one buffer (two sequences
            // never share a block or a ring), so they do not overlap.
            for (base, w) in [(k, wk), (v, wv)] {
                let (from, to) = ((r.src * w) as u64, (r.dst * w) as u64);
                // SAFETY: both ranges lie inside the buffer: copy_runs gives slots of this
                // layer's pool or rings, which the buffer was sized to hold.
                unsafe {
                    result::memcpy_dtod_async(base + to, base + from, r.len * w, stream.cu_stream())
                }
                .map_err(err("copying a cached prefix"))?;
            }
        }
    }
    Ok(())
}
