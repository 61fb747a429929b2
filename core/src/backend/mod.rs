//! The op interface every compute backend implements (core's CPU and wgpu backends, and
//! extension crates registered by the program that assembles Weft).
//!
//! A model never touches raw memory. It loads its weights into the backend once (getting
//! [`Weight`] handles) and, for every forward step, records a [`Graph`] of ops on backend tensor
//! handles. [`Backend::execute`] runs the whole graph and returns only what the graph marked as
//! output (logits of selected rows, or top-k ids), so a GPU backend can record one step — all
//! layers, all sequences in the batch — into a single submission with no per-op round trips.
//!
//! A step is a batch of rows: each row is one token of one sequence, with its position and the
//! sequence's KV-cache slot ([`StepBatch`]). A prefill chunk, decode tokens of many sequences,
//! or both can share one step (continuous batching).

mod block_table;
pub mod cpu;
mod graph;
mod pending;
mod registry;
mod step;
pub mod wgpu;

use std::sync::Arc;

pub use block_table::{copy_plan, copy_runs, BlockTables, CopyRun, KV_BLOCK, NO_BLOCK};
pub use graph::{Graph, MultiRope, Node, Op, PoolMode, RowEmbeddings, RowIndex, SeqSpan, TensorId};
pub use pending::{PendingStep, StepFuture};
pub use registry::{
    BackendFactory, BackendOptions, BackendRegistry, CpuFactory, Probe, WgpuFactory,
};
pub use step::OutputShape;

/// The `k` largest logits of a row with their ids, best first (for host-side reporting).
pub fn top_k_host(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    cpu::top_k(row, k)
}

use crate::dtype::GgmlType;
use crate::gguf::ModelFile;

/// A weight tensor held by a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weight {
    /// Backend-specific handle.
    pub id: u32,
    /// Storage type (quantized blocks are kept as they are in the file).
    pub ty: GgmlType,
    /// Elements per row (the GGUF `dims[0]`).
    pub cols: usize,
    /// Number of rows (product of the other dims).
    pub rows: usize,
}

impl Weight {
    /// Where weight `name` lies in `file`: the handle fields but `id` (set by the backend that
    /// loads it) and the byte range of its data, checked to lie inside the file.
    pub fn locate(file: &ModelFile, name: &str) -> Result<(Weight, std::ops::Range<usize>)> {
        let info = file
            .gguf
            .tensor(name)
            .ok_or_else(|| BackendError::MissingTensor(name.to_string()))?;
        let range = file.gguf.tensor_range(info);
        let range = range.start as usize..range.end as usize;
        if range.end > file.bytes().len() {
            return Err(BackendError::BadTensor {
                name: name.to_string(),
                message: "data lies outside the file".into(),
            });
        }
        let w = Weight {
            id: 0,
            ty: info.ty,
            cols: info.dims.first().copied().unwrap_or(1) as usize,
            rows: info.n_rows() as usize,
        };
        Ok((w, range))
    }
}

/// A key/value cache owned by a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvCacheId(pub u32);

/// Element type of cached keys and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KvDtype {
    /// Half precision (the default, as llama.cpp).
    #[default]
    F16,
    /// Full precision.
    F32,
}

/// Shape of one layer's cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvLayerSpec {
    /// Key/value heads.
    pub n_kv_head: usize,
    /// Elements per key head.
    pub head_dim_k: usize,
    /// Elements per value head.
    pub head_dim_v: usize,
    /// Positions kept per sequence. For a sliding-window layer this is a ring buffer
    /// (position `p` lives in slot `p % capacity`) and must hold the window plus one batch.
    pub capacity: usize,
    /// Sliding window (keys older than `window` positions are never attended), if any.
    pub window: Option<usize>,
}

/// Shape of a whole cache: every layer, for `n_seq` sequence slots.
///
/// Full-attention layers (no window) keep their keys and values in a shared pool of
/// [`KV_BLOCK`]-position blocks, reached through each sequence's block table
/// ([`Backend::set_block_table`]); sliding-window layers keep a ring of `capacity` positions per
/// sequence slot, which their window already bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvCacheSpec {
    pub layers: Vec<KvLayerSpec>,
    pub n_seq: usize,
    pub dtype: KvDtype,
    /// Blocks in the shared pool; `None`: a full context for every sequence slot (and every
    /// table starts mapped to its own blocks, so a cache used without tables works as one
    /// made of separate slots).
    pub pool_blocks: Option<usize>,
}

impl KvCacheSpec {
    /// Table entries per sequence: blocks covering the longest full-attention layer.
    pub fn blocks_per_seq(&self) -> usize {
        self.layers
            .iter()
            .filter(|l| l.window.is_none())
            .map(|l| l.capacity.div_ceil(KV_BLOCK))
            .max()
            .unwrap_or(0)
    }

    /// Blocks in the pool.
    pub fn n_blocks(&self) -> usize {
        self.pool_blocks
            .unwrap_or(self.n_seq * self.blocks_per_seq())
    }
}

/// The per-row inputs of one step. All slices have one entry per row.
#[derive(Clone, Copy, Debug)]
pub struct StepBatch<'a> {
    /// Token ids.
    pub tokens: &'a [u32],
    /// Position of each token in its sequence.
    pub positions: &'a [u32],
    /// KV-cache sequence slot of each token.
    pub seqs: &'a [u32],
}

/// One output of a step, read back to the host.
#[derive(Clone, Debug, PartialEq)]
pub enum Readback {
    /// A row-major `rows × cols` matrix (e.g. logits).
    F32 {
        rows: usize,
        cols: usize,
        data: Vec<f32>,
    },
    /// The `k` largest entries of each row, best first.
    TopK {
        rows: usize,
        k: usize,
        ids: Vec<u32>,
        values: Vec<f32>,
    },
}

/// Why a backend could not do something.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum BackendError {
    #[error("tensor {0:?} is not in the model file")]
    MissingTensor(String),
    #[error("tensor {name}: {message}")]
    BadTensor { name: String, message: String },
    #[error("invalid step: {0}")]
    InvalidStep(String),
    #[error("sequence {seq} is at position {pos} but the context holds {capacity} tokens; start a new sequence or use a larger --ctx")]
    ContextFull {
        seq: u32,
        pos: usize,
        capacity: usize,
    },
    #[error("{0}")]
    Unsupported(String),
}

/// Result type of backend calls.
pub type Result<T> = std::result::Result<T, BackendError>;

/// A compute backend: owns weights, caches and activations; executes recorded step graphs.
pub trait Backend: Send {
    /// Short name (`cpu`, `wgpu`, ...).
    fn name(&self) -> &'static str;

    /// Makes a tensor of the model file available to graphs. The CPU backend uses the bytes in
    /// place (memory map); a GPU backend uploads them as they are.
    fn load_weight(&mut self, file: &Arc<ModelFile>, name: &str) -> Result<Weight>;

    /// Allocates a key/value cache.
    fn create_kv_cache(&mut self, spec: &KvCacheSpec) -> Result<KvCacheId>;

    /// Points sequence slot `seq`'s logical blocks at pool blocks: entry `i` holds positions
    /// `i·KV_BLOCK..(i+1)·KV_BLOCK` of the full-attention layers, and [`NO_BLOCK`] ends the
    /// mapped part. Steps read and write keys and values through the table last set.
    fn set_block_table(&mut self, kv: KvCacheId, seq: u32, table: &[u32]) -> Result<()> {
        let _ = (kv, seq, table);
        Err(BackendError::Unsupported(format!(
            "the {} backend has no paged KV cache",
            self.name()
        )))
    }

    /// Copies sequence slot `src`'s keys and values at positions `0..n` into slot `dst` (whose
    /// table must already map them), every layer: a prompt that shares its start with another
    /// sequence's tokens takes that part of its cache instead of computing it again. Runs
    /// after every step already submitted and before any later one. The layout of each copy
    /// is [`copy_runs`]'s.
    fn copy_prefix(&mut self, kv: KvCacheId, src: u32, dst: u32, n: usize) -> Result<()> {
        let _ = (kv, src, dst, n);
        Err(BackendError::Unsupported(format!(
            "the {} backend cannot copy a cached prefix",
            self.name()
        )))
    }

    /// Runs one recorded step and returns the graph's outputs in the order they were marked.
    fn execute(&mut self, graph: &Graph, batch: &StepBatch) -> Result<Vec<Readback>>;

    /// Starts a step whose outputs are awaited with [`PendingStep::wait`] (the browser cannot
    /// block on GPU readback). By default the step runs synchronously through `execute`.
    fn submit(&mut self, graph: &Graph, batch: &StepBatch) -> Result<PendingStep> {
        self.execute(graph, batch).map(PendingStep::ready)
    }
}
