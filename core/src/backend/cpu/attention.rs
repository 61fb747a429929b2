//! The CPU key/value cache and causal attention over it.

use std::sync::atomic::{AtomicUsize, Ordering};

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::pool::ThreadPool;
use super::simd;
use crate::backend::{BackendError, KvCacheSpec, KvDtype, KvLayerSpec, Result};

/// Cached keys or values of one layer: `[n_seq][capacity][n_kv_head · head_dim]`.
enum Store {
    F16(Vec<f16>),
    F32(Vec<f32>),
}

impl Store {
    fn new(dtype: KvDtype, len: usize) -> Self {
        match dtype {
            KvDtype::F16 => Store::F16(vec![f16::ZERO; len]),
            KvDtype::F32 => Store::F32(vec![0.0; len]),
        }
    }

    fn write(&mut self, at: usize, src: &[f32]) {
        match self {
            Store::F16(d) => d[at..at + src.len()].convert_from_f32_slice(src),
            Store::F32(d) => d[at..at + src.len()].copy_from_slice(src),
        }
    }

    /// Copies `out.len()` elements starting at `at` into `out` as f32.
    fn read(&self, at: usize, out: &mut [f32]) {
        match self {
            Store::F16(d) => {
                let n = out.len();
                // Whole-slice conversion uses F16C eight lanes at a time where available.
                d[at..at + n].convert_to_f32_slice(out);
            }
            Store::F32(d) => out.copy_from_slice(&d[at..at + out.len()]),
        }
    }
}

struct Layer {
    spec: KvLayerSpec,
    k: Store,
    v: Store,
}

/// A whole cache: every layer, every sequence slot.
pub struct KvStorage {
    n_seq: usize,
    dtype: KvDtype,
    layers: Vec<Layer>,
}

impl KvStorage {
    /// Allocates zeroed storage for `spec`.
    pub fn new(spec: &KvCacheSpec) -> Result<Self> {
        if spec.n_seq == 0 {
            return Err(BackendError::Unsupported(
                "a KV cache needs at least one sequence slot".into(),
            ));
        }
        let layers = spec
            .layers
            .iter()
            .map(|l| {
                let per_pos_k = l.n_kv_head * l.head_dim_k;
                let per_pos_v = l.n_kv_head * l.head_dim_v;
                let slots = spec.n_seq * l.capacity;
                Layer {
                    spec: l.clone(),
                    k: Store::new(spec.dtype, slots * per_pos_k),
                    v: Store::new(spec.dtype, slots * per_pos_v),
                }
            })
            .collect();
        Ok(KvStorage {
            n_seq: spec.n_seq,
            dtype: spec.dtype,
            layers,
        })
    }

    fn layer(&self, layer: usize) -> Result<&Layer> {
        self.layers
            .get(layer)
            .ok_or_else(|| BackendError::InvalidStep(format!("the KV cache has no layer {layer}")))
    }

    /// Writes rows of keys and values at their sequences and positions.
    pub fn store(
        &mut self,
        layer: usize,
        k: &[f32],
        v: &[f32],
        positions: &[u32],
        seqs: &[u32],
    ) -> Result<()> {
        let n_seq = self.n_seq;
        self.layer(layer)?;
        let l = &mut self.layers[layer];
        let wk = l.spec.n_kv_head * l.spec.head_dim_k;
        let wv = l.spec.n_kv_head * l.spec.head_dim_v;
        if k.len() != positions.len() * wk || v.len() != positions.len() * wv {
            return Err(BackendError::InvalidStep(format!(
                "layer {layer}: key/value rows do not match the cache width"
            )));
        }
        let cap = l.spec.capacity;
        for (r, (&pos, &seq)) in positions.iter().zip(seqs).enumerate() {
            if seq as usize >= n_seq {
                return Err(BackendError::InvalidStep(format!(
                    "sequence slot {seq} does not exist (the cache has {n_seq})"
                )));
            }
            if l.spec.window.is_none() && pos as usize >= cap {
                return Err(BackendError::ContextFull {
                    seq,
                    pos: pos as usize,
                    capacity: cap,
                });
            }
            let slot = seq as usize * cap + pos as usize % cap;
            l.k.write(slot * wk, &k[r * wk..(r + 1) * wk]);
            l.v.write(slot * wv, &v[r * wv..(r + 1) * wv]);
        }
        Ok(())
    }

    /// Causal attention of `q` rows (`n_head` heads each) over the cache into `out`.
    #[allow(clippy::too_many_arguments)]
    pub fn attend(
        &self,
        pool: &ThreadPool,
        layer: usize,
        q: &[f32],
        n_head: usize,
        scale: f32,
        positions: &[u32],
        seqs: &[u32],
        out: &mut [f32],
    ) -> Result<()> {
        let l = self.layer(layer)?;
        let s = &l.spec;
        let (hk, hv, n_kv) = (s.head_dim_k, s.head_dim_v, s.n_kv_head);
        if n_kv == 0 || !n_head.is_multiple_of(n_kv) || q.len() != positions.len() * n_head * hk {
            return Err(BackendError::InvalidStep(format!(
                "layer {layer}: {n_head} query heads of {hk} do not fit {n_kv} key/value heads"
            )));
        }
        let group = n_head / n_kv;
        for (&pos, &seq) in positions.iter().zip(seqs) {
            let span = self.span(s, pos as usize);
            if seq as usize >= self.n_seq || span.len() > s.capacity {
                return Err(BackendError::InvalidStep(format!(
                    "layer {layer}: sequence {seq} position {pos} is outside the cache"
                )));
            }
        }
        let round_q = self.dtype == KvDtype::F16;
        let n_tasks = positions.len() * n_kv;
        let out_ptr = SyncPtr(out.as_mut_ptr());
        // Tasks are taken from a shared counter, latest rows first: a causal row's work grows
        // with its position, so fixed contiguous shares would leave the thread holding the
        // early rows idle for most of a prefill chunk; longest-first keeps the tail short.
        let next = AtomicUsize::new(0);
        pool.run(&|_| {
            let out_ptr = &out_ptr;
            let mut krow = vec![0f32; hk];
            let mut vrow = vec![0f32; hv];
            let mut qh = vec![0f32; group * hk];
            let mut acc = vec![0f32; group * hv];
            let mut scores: Vec<f32> = Vec::new();
            loop {
                let taken = next.fetch_add(1, Ordering::Relaxed);
                if taken >= n_tasks {
                    break;
                }
                let task = n_tasks - 1 - taken;
                let (r, kvh) = (task / n_kv, task % n_kv);
                let (pos, seq) = (positions[r] as usize, seqs[r] as usize);
                let span = self.span(s, pos);
                let n = span.len();
                // Query heads of this group, rounded to f16 when the cache is f16 (llama.cpp
                // multiplies in the cache's type).
                let q0 = (r * n_head + kvh * group) * hk;
                qh.copy_from_slice(&q[q0..q0 + group * hk]);
                if round_q {
                    for v in qh.iter_mut() {
                        *v = f16::from_f32(*v).to_f32();
                    }
                }
                scores.clear();
                scores.resize(group * n, 0.0);
                for (j, p) in span.clone().enumerate() {
                    let slot = seq * s.capacity + p % s.capacity;
                    l.k.read((slot * n_kv + kvh) * hk, &mut krow);
                    for g in 0..group {
                        scores[g * n + j] = simd::dot(&qh[g * hk..(g + 1) * hk], &krow) * scale;
                    }
                }
                for g in 0..group {
                    super::ops::softmax(&mut scores[g * n..(g + 1) * n]);
                }
                acc.iter_mut().for_each(|v| *v = 0.0);
                for (j, p) in span.clone().enumerate() {
                    let slot = seq * s.capacity + p % s.capacity;
                    l.v.read((slot * n_kv + kvh) * hv, &mut vrow);
                    for g in 0..group {
                        let mut w = scores[g * n + j];
                        if round_q {
                            w = f16::from_f32(w).to_f32();
                        }
                        simd::axpy(&mut acc[g * hv..(g + 1) * hv], w, &vrow);
                    }
                }
                let o0 = (r * n_head + kvh * group) * hv;
                // SAFETY: each task writes its own disjoint range of `out` (its row and its
                // group of heads), and `out` outlives `pool.run`.
                unsafe {
                    std::ptr::copy_nonoverlapping(acc.as_ptr(), out_ptr.0.add(o0), group * hv);
                }
            }
        });
        Ok(())
    }

    /// Cached positions visible from `pos`: from the window start (or 0) to `pos`.
    fn span(&self, s: &KvLayerSpec, pos: usize) -> std::ops::Range<usize> {
        let lo = match s.window {
            Some(w) => (pos + 1).saturating_sub(w),
            None => 0,
        };
        lo..pos + 1
    }
}

/// A raw output pointer shared by pool threads that write disjoint ranges.
pub struct SyncPtr(pub *mut f32);
unsafe impl Sync for SyncPtr {}
unsafe impl Send for SyncPtr {}
