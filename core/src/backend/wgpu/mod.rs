//! The wgpu backend: every op of a step graph as a WGSL kernel (from `weft-shaders`), on any
//! GPU wgpu reaches natively (Vulkan, Metal, DX12, GL) and on software Vulkan (Mesa lavapipe).
//!
//! - Weights are uploaded once, as they are in the file (quantized blocks stay quantized;
//!   kernels dequantize on the fly). A tensor larger than the adapter's storage binding limit is
//!   split by rows into several buffers, each product/gather dispatched once per chunk. Types
//!   without a kernel dequantizer are converted to f32 at load.
//! - [`Backend::execute`] records the whole step — all layers, all rows — into one command
//!   encoder with one submission, and reads back only the graph's outputs (logits, or the top-k
//!   ids and values when the graph ends in `TopK`). Pipelines are compiled once and cached.
//! - Kernels use core WGSL (f16 through `pack2x16float`/`unpack2x16float` and integer
//!   rounding), so the same code runs on every adapter; at most 7 storage buffers per stage,
//!   256 invocations per workgroup and WebGPU's default 16 KiB of workgroup memory. Where the
//!   adapter has them, subgroup operations (maxima and best indices of the reductions) and
//!   shader-f16 (native f16 reads of F16 weights and the f16 cache) replace their core forms,
//!   with bit-identical results. The one language extension is WGSL's
//!   `packed_4x8_integer_dot_product` (naga on every native backend, with a polyfill where the
//!   device lacks integer dot products; Chromium's WebGPU): activation quants are stored packed
//!   four to a word (`pack4xI8`, read with `unpack4xI8`), and the tiled prefill product dots
//!   words with `dot4I8Packed`.
//! - Products: on GPUs, cooperative rows for decode and float weights, tiles of 64 weight rows ×
//!   16 tokens decoded into workgroup memory for prefill; on CPU adapters one row per
//!   invocation. All give the same bits.
//! - Where activations are quantized to 8 bits before a product (as llama.cpp and the CPU
//!   backend do), one ulp upstream can move a quant and, through it, logits by tenths; so the
//!   kernels feeding and forming those products follow the CPU backend's arithmetic bit for
//!   bit: RMSNorm's f64 sum and correctly rounded sqrt/division, the quantizer's divisions, the
//!   products' integer block dots in the CPU's float order, attention's dot order and f64
//!   softmax sum, SiLU (`weft-shaders`' `exact.wgsl` builds these from integer operations).
//!   What remains different: GPU `cos`/`sin` in RoPE and rare `exp` near-ties.

// In the browser the device is opened asynchronously by the wasm crate.
#![cfg_attr(target_arch = "wasm32", allow(dead_code))]

mod device;
mod kv;
mod open_async;
mod pending;
mod pipelines;
mod record;
#[cfg(target_arch = "wasm32")]
mod web_features;
mod weights;

use std::sync::Arc;

#[cfg(not(target_arch = "wasm32"))]
pub use device::list_adapters;
pub use device::{AdapterSummary, NO_ADAPTER};
pub use open_async::NO_WEBGPU;
pub use pending::GpuPending;

use self::kv::GpuKvCache;
use self::pipelines::Pipelines;
use self::weights::GpuWeight;
use super::{
    Backend, Graph, KvCacheId, KvCacheSpec, PendingStep, Readback, Result, StepBatch, Weight,
};
use crate::gguf::ModelFile;

/// Settings of the wgpu backend.
#[derive(Clone, Debug, Default)]
pub struct WgpuOptions {
    /// Adapter index (as listed by `weft devices`); None picks the default high-performance one.
    pub device_index: Option<usize>,
    /// Largest buffer a weight chunk may take, below the adapter's limit (tests use this to
    /// exercise split tensors on small weights).
    pub max_chunk_bytes: Option<u64>,
    /// Matrix-product kernel: None picks by adapter (one row per invocation on CPU adapters,
    /// where barriers are costly; cooperative rows with a workgroup reduction on GPUs).
    pub matmul: Option<MatMulKernel>,
    /// Never use subgroup operations, even where the adapter has them (also forced natively by
    /// a non-empty `WEFT_WGPU_NO_SUBGROUPS` other than `0`). Results are bit-identical either
    /// way: subgroups only take maxima and best indices, whose order does not matter.
    pub no_subgroups: bool,
    /// Never use shader-f16 (native `f16` storage reads of F16 weights and the f16 KV cache),
    /// even where the adapter has it (also forced natively by a non-empty `WEFT_WGPU_NO_F16`
    /// other than `0`); the fallback unpacks u32 words. Results are bit-identical either way:
    /// an f16 converts to f32 exactly.
    pub no_f16: bool,
    /// Never use WGSL's `packed_4x8_integer_dot_product` built-ins (`pack4xI8`, `unpack4xI8`,
    /// `dot4I8Packed`) for the packed 8-bit activation quants, even where the WGSL
    /// implementation has them (also forced natively by a non-empty `WEFT_WGPU_NO_PACKED_DOT`
    /// other than `0`); the fallback does the same integer work with shifts and masks. Browsers
    /// without the language extension always take the fallback. Same results either way.
    pub no_packed_builtins: bool,
}

/// The two forms of the matrix-product kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatMulKernel {
    /// Several invocations per row, partial sums reduced in workgroup memory; for several
    /// tokens with quantized weights, tiles of rows × tokens decoded into workgroup memory.
    Cooperative,
    /// One invocation per row, no barriers.
    RowPerInvocation,
}

/// Work done by the last step, for benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepStats {
    /// Compute dispatches.
    pub dispatches: usize,
    /// Buffer-to-buffer copies (row selection, readback).
    pub copies: usize,
    /// Command submissions.
    pub submissions: usize,
    /// Bytes read back to the host.
    pub readback_bytes: usize,
}

/// The wgpu backend.
pub struct WgpuBackend {
    gpu: device::Gpu,
    pipelines: Pipelines,
    weights: Vec<GpuWeight>,
    caches: Vec<GpuKvCache>,
    pool: record::BufferPool,
    max_chunk: u64,
    row_per_invocation: bool,
    stats: StepStats,
}

impl WgpuBackend {
    /// Opens the adapter chosen by `opts`. Fails with a one-line message (suggesting
    /// `--backend cpu`) when there is no adapter.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new(opts: &WgpuOptions) -> Result<Self> {
        let gpu = device::open(opts.device_index, opts)?;
        Ok(Self::with_gpu(gpu, opts))
    }

    /// The backend on an open device.
    fn with_gpu(gpu: device::Gpu, opts: &WgpuOptions) -> Self {
        let limit = gpu
            .limits
            .max_storage_buffer_binding_size
            .min(gpu.limits.max_buffer_size);
        // Leave room for the padding word a chunk carries (unaligned reads past the end).
        let mut max_chunk = limit.saturating_sub(16) & !3;
        if let Some(m) = opts.max_chunk_bytes {
            max_chunk = max_chunk.min(m);
        }
        let pool = record::BufferPool::new(&gpu.device);
        let row_per_invocation = match opts.matmul {
            Some(k) => k == MatMulKernel::RowPerInvocation,
            None => gpu.summary.device_type == "Cpu",
        };
        let pipelines = Pipelines::new(gpu.subgroups, gpu.f16, gpu.packed_builtins);
        WgpuBackend {
            gpu,
            pipelines,
            weights: Vec::new(),
            caches: Vec::new(),
            pool,
            max_chunk,
            row_per_invocation,
            stats: StepStats::default(),
        }
    }

    /// Starts recording a step (checks the batch against the graph).
    fn recorder<'a>(
        &'a mut self,
        graph: &Graph,
        batch: &'a StepBatch<'a>,
    ) -> Result<record::Recorder<'a>> {
        graph.check_batch(batch)?;
        record::Recorder::new(
            &self.gpu,
            &mut self.pipelines,
            &self.weights,
            &self.caches,
            &mut self.pool,
            batch,
            graph,
            self.row_per_invocation,
        )
    }

    /// The adapter in use.
    pub fn adapter(&self) -> &AdapterSummary {
        &self.gpu.summary
    }

    /// Counts of the last executed step.
    pub fn last_step_stats(&self) -> StepStats {
        self.stats
    }

    /// Whether the reduction kernels use subgroup operations (see [`WgpuOptions::no_subgroups`]).
    pub fn uses_subgroups(&self) -> bool {
        self.pipelines.subgroups()
    }

    /// Whether F16 weights and the f16 KV cache are read as native f16 (see
    /// [`WgpuOptions::no_f16`]).
    pub fn uses_f16(&self) -> bool {
        self.pipelines.f16()
    }

    /// Whether packed 8-bit quants go through WGSL's `packed_4x8_integer_dot_product`
    /// built-ins (see [`WgpuOptions::no_packed_builtins`]).
    pub fn uses_packed_builtins(&self) -> bool {
        self.pipelines.packed_builtins()
    }

    /// Pipelines compiled so far.
    pub fn pipelines_compiled(&self) -> usize {
        self.pipelines.len()
    }

    /// Buffers a weight was split into (1 unless it exceeds a binding).
    pub fn weight_chunks(&self, w: &Weight) -> usize {
        self.weights
            .get(w.id as usize)
            .map_or(0, |g| g.chunks.len())
    }
}

impl Backend for WgpuBackend {
    fn name(&self) -> &'static str {
        "wgpu"
    }

    fn load_weight(&mut self, file: &Arc<ModelFile>, name: &str) -> Result<Weight> {
        let (handle, range) = Weight::locate(file, name)?;
        let w = GpuWeight::upload(
            &self.gpu.device,
            name,
            handle.ty,
            handle.cols,
            handle.rows,
            &file.bytes()[range],
            self.max_chunk,
        )?;
        self.weights.push(w);
        Ok(Weight {
            id: self.weights.len() as u32 - 1,
            ..handle
        })
    }

    fn create_kv_cache(&mut self, spec: &KvCacheSpec) -> Result<KvCacheId> {
        let c = GpuKvCache::new(
            &self.gpu.device,
            spec,
            self.gpu.limits.max_storage_buffer_binding_size,
        )?;
        c.upload_tables(&self.gpu.queue);
        self.caches.push(c);
        Ok(KvCacheId(self.caches.len() as u32 - 1))
    }

    fn set_block_table(&mut self, kv: KvCacheId, seq: u32, table: &[u32]) -> Result<()> {
        let queue = &self.gpu.queue;
        self.caches
            .get_mut(kv.0 as usize)
            .ok_or_else(|| super::BackendError::InvalidStep(format!("unknown KV cache {}", kv.0)))?
            .set_table(queue, seq, table)
    }

    fn copy_prefix(&mut self, kv: KvCacheId, src: u32, dst: u32, n: usize) -> Result<()> {
        let cache = self.caches.get(kv.0 as usize).ok_or_else(|| {
            super::BackendError::InvalidStep(format!("unknown KV cache {}", kv.0))
        })?;
        let mut enc = self
            .gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("copy prefix"),
            });
        cache.copy_prefix(&self.gpu.device, &mut enc, src, dst, n)?;
        // Queue order puts the copy after every step already submitted and before the next.
        self.gpu.queue.submit([enc.finish()]);
        Ok(())
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn execute(&mut self, graph: &Graph, batch: &StepBatch) -> Result<Vec<Readback>> {
        let mut rec = self.recorder(graph, batch)?;
        for i in 0..graph.nodes.len() {
            rec.node(graph, i)?;
        }
        let (out, stats) = rec.finish(graph)?;
        self.stats = stats;
        Ok(out)
    }

    #[cfg(target_arch = "wasm32")]
    fn execute(&mut self, _graph: &Graph, _batch: &StepBatch) -> Result<Vec<Readback>> {
        Err(super::BackendError::Unsupported(
            "synchronous GPU readback is not available in the browser; use Engine::step_async"
                .into(),
        ))
    }

    fn submit(&mut self, graph: &Graph, batch: &StepBatch) -> Result<PendingStep> {
        Ok(self.submit_step(graph, batch)?.into_pending())
    }
}
