//! The CPU backend: runs step graphs op by op on a thread pool, with weights used in place from
//! the model file's memory map.

mod attention;
mod attn_kernels;
mod encoder;
mod encoder_attn;
mod gemm_f32;
mod grid_pool;
mod matmul;
pub(crate) mod ops;
mod pool;
mod simd;

use std::sync::Arc;

/// The error function and BERT's GELU as the CPU backend computes them.
pub use encoder::{erf, gelu_erf};
/// GELU as the CPU backend computes it (the wgpu backend tabulates it to match).
pub(crate) use ops::gelu;
pub use ops::top_k;
pub use pool::{physical_cores, ThreadPool};

use self::attention::KvStorage;
use self::matmul::WeightView;
use super::{
    Backend, BackendError, Graph, KvCacheId, KvCacheSpec, Op, Readback, Result, StepBatch, Weight,
};
use crate::dtype::GgmlType;
use crate::gguf::ModelFile;

/// A weight: where its bytes are in the (mapped) file. Vectors (norms, biases) are also kept
/// as f32, since ops read them element by element; they are a negligible fraction of a model.
struct CpuWeight {
    name: String,
    file: Arc<ModelFile>,
    start: usize,
    len: usize,
    ty: GgmlType,
    cols: usize,
    rows: usize,
    vector: Option<Vec<f32>>,
    /// An f32 matrix packed for [`gemm_f32`], made on its first product of many rows.
    packed: std::sync::OnceLock<Option<gemm_f32::Packed>>,
}

impl CpuWeight {
    fn view(&self) -> WeightView<'_> {
        WeightView {
            name: &self.name,
            ty: self.ty,
            cols: self.cols,
            rows: self.rows,
            data: &self.file.bytes()[self.start..self.start + self.len],
        }
    }
}

/// The CPU backend.
pub struct CpuBackend {
    pool: ThreadPool,
    weights: Vec<CpuWeight>,
    caches: Vec<KvStorage>,
    /// Activation buffers by graph node; a buffer goes back to `spare` after its last reader.
    bufs: Vec<Vec<f32>>,
    /// Buffers free for reuse (kept across steps, so a step allocates nothing once warm).
    spare: Vec<Vec<f32>>,
    /// Top-k ids per node (only for `TopK` nodes).
    ids: Vec<Vec<u32>>,
    /// Scratch for quantized activations.
    act: Vec<u8>,
    /// RoPE (cos, sin) tables of the current step, by (base bits, rotated dims, frequency
    /// factors): every layer with the same base rotates by the same angles.
    rope_tables: Vec<RopeKey>,
    /// [`Op::RopeMulti`] tables of the current step (every layer of a model rotates by the
    /// same positions: a DiT's 3-D table is formed once, not twice a block).
    multi_tables: Vec<(MultiKey, Vec<(f32, f32)>)>,
}

/// What a [`Op::RopeMulti`] table depends on: the positions (the graph's `Arc`, by address:
/// it lives as long as the step), rotated dims, base bits, sections and kind.
type MultiKey = (usize, usize, u32, [u32; 4], super::MultiRope);

/// Products of at least this many rows with f32 weights use the packed GEMM.
const GEMM_MIN_ROWS: usize = 4;
/// Products of at least this many rows with f16 weights go through the same GEMM, each panel
/// converted to f32 per chunk of tokens (for fewer rows the row kernels, which read the f16
/// weights directly, convert less).
const F16_GEMM_MIN_ROWS: usize = 64;

/// A step's RoPE table and what it depends on besides the positions.
type RopeKey = ((u32, usize, Option<u32>), Vec<(f32, f32)>);

impl CpuBackend {
    /// A backend with `n_threads` threads (0 = one per physical core).
    pub fn new(n_threads: usize) -> Self {
        let n = if n_threads == 0 {
            physical_cores()
        } else {
            n_threads
        };
        CpuBackend {
            pool: ThreadPool::new(n),
            weights: Vec::new(),
            caches: Vec::new(),
            bufs: Vec::new(),
            spare: Vec::new(),
            ids: Vec::new(),
            act: Vec::new(),
            rope_tables: Vec::new(),
            multi_tables: Vec::new(),
        }
    }

    /// Threads used.
    pub fn n_threads(&self) -> usize {
        self.pool.n_threads()
    }

    /// Bytes of weight matrices this backend's products have streamed so far (shared, so it
    /// can be read while the backend is inside an engine): a step over B sequences should
    /// stream each weight once, not B times.
    pub fn weight_meter(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        self.pool.weight_meter()
    }

    fn weight(&self, w: &Weight) -> Result<&CpuWeight> {
        self.weights
            .get(w.id as usize)
            .ok_or_else(|| BackendError::InvalidStep(format!("unknown weight handle {}", w.id)))
    }

    fn vector(&self, w: &Weight) -> Result<&[f32]> {
        let cw = self.weight(w)?;
        cw.vector.as_deref().ok_or_else(|| BackendError::BadTensor {
            name: cw.name.clone(),
            message: "used as a vector but it is a matrix".into(),
        })
    }

    fn cache(&self, kv: KvCacheId) -> Result<&KvStorage> {
        self.caches
            .get(kv.0 as usize)
            .ok_or_else(|| BackendError::InvalidStep(format!("unknown KV cache {}", kv.0)))
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn load_weight(&mut self, file: &Arc<ModelFile>, name: &str) -> Result<Weight> {
        let (handle, range) = Weight::locate(file, name)?;
        let mut w = CpuWeight {
            name: name.to_string(),
            file: file.clone(),
            start: range.start,
            len: range.len(),
            ty: handle.ty,
            cols: handle.cols,
            rows: handle.rows,
            vector: None,
            packed: std::sync::OnceLock::new(),
        };
        if handle.rows == 1 {
            w.vector = Some(matmul::to_f32_vec(&w.view())?);
        }
        self.weights.push(w);
        Ok(Weight {
            id: self.weights.len() as u32 - 1,
            ..handle
        })
    }

    fn create_kv_cache(&mut self, spec: &KvCacheSpec) -> Result<KvCacheId> {
        self.caches.push(KvStorage::new(spec)?);
        Ok(KvCacheId(self.caches.len() as u32 - 1))
    }

    fn set_block_table(&mut self, kv: KvCacheId, seq: u32, table: &[u32]) -> Result<()> {
        self.caches
            .get_mut(kv.0 as usize)
            .ok_or_else(|| BackendError::InvalidStep(format!("unknown KV cache {}", kv.0)))?
            .set_table(seq, table)
    }

    fn copy_prefix(&mut self, kv: KvCacheId, src: u32, dst: u32, n: usize) -> Result<()> {
        self.caches
            .get_mut(kv.0 as usize)
            .ok_or_else(|| BackendError::InvalidStep(format!("unknown KV cache {}", kv.0)))?
            .copy_prefix(src, dst, n)
    }

    fn execute(&mut self, graph: &Graph, batch: &StepBatch) -> Result<Vec<Readback>> {
        graph.check_batch(batch)?;
        // Free every buffer of the previous step, then hand them out again by liveness: a
        // node's buffer is released after its last reader, so only a few are alive at once.
        for b in self.bufs.iter_mut() {
            if b.capacity() > 0 {
                self.spare.push(std::mem::take(b));
            }
        }
        self.bufs.resize_with(graph.nodes.len(), Vec::new);
        self.ids.resize_with(graph.nodes.len(), Vec::new);
        // RoPE tables depend on the step's positions.
        self.rope_tables.clear();
        self.multi_tables.clear();
        let last_use = graph.last_uses();
        // Nodes already computed as part of an earlier node's group.
        let mut done = vec![false; graph.nodes.len()];
        for i in 0..graph.nodes.len() {
            let node = &graph.nodes[i];
            let group = if done[i] {
                Vec::new()
            } else {
                self.matvec_group(graph, i, &done)
            };
            if group.len() > 1 {
                let mut outs: Vec<Vec<f32>> = group
                    .iter()
                    .map(|&j| {
                        let need = graph.nodes[j].rows * graph.nodes[j].cols;
                        let mut out = self.take_spare(need);
                        out.resize(need, 0.0);
                        out
                    })
                    .collect();
                let r = self.run_matvec_group(graph, &group, &mut outs);
                for (&j, out) in group.iter().zip(outs) {
                    self.bufs[j] = out;
                    done[j] = true;
                }
                r?;
            } else if !done[i] {
                let need = node.rows * node.cols;
                let mut out = self.take_spare(need);
                out.resize(need, 0.0);
                let r = self.run_node(graph, i, batch, &mut out);
                self.bufs[i] = out;
                r?;
            }
            for t in node
                .op
                .inputs()
                .into_iter()
                .chain([super::TensorId(i as u32)])
            {
                let t = t.0 as usize;
                if last_use[t] == i && self.bufs[t].capacity() > 0 {
                    let b = std::mem::take(&mut self.bufs[t]);
                    self.spare.push(b);
                }
            }
        }
        Ok(graph
            .outputs
            .iter()
            .map(|&t| {
                let shape = graph.output_shape(t);
                let data = self.bufs[t.0 as usize].clone();
                let ids = if shape.ids() > 0 {
                    self.ids[t.0 as usize].clone()
                } else {
                    Vec::new()
                };
                shape.assemble(data, ids)
            })
            .collect())
    }
}

impl CpuBackend {
    /// An empty buffer from the spare list: the smallest that holds `need` elements, else the
    /// largest (it will grow).
    fn take_spare(&mut self, need: usize) -> Vec<f32> {
        let fit = self
            .spare
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= need)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        let pick = fit.or_else(|| {
            self.spare
                .iter()
                .enumerate()
                .max_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i)
        });
        match pick {
            Some(i) => {
                let mut b = self.spare.swap_remove(i);
                b.clear();
                b
            }
            None => Vec::new(),
        }
    }

    /// For a one-row product at node `i`: it and the later one-row products of the same input
    /// (within a few nodes, not yet computed) whose quantized activation type is the same,
    /// which [`Self::run_matvec_group`] computes in one pool job. Empty or one node otherwise.
    fn matvec_group(&self, graph: &Graph, i: usize, done: &[bool]) -> Vec<usize> {
        /// How far ahead to look (past bias additions between a layer's projections).
        const LOOKAHEAD: usize = 8;
        let Op::MatMul { w, x } = &graph.nodes[i].op else {
            return Vec::new();
        };
        let key = |w: &Weight| {
            self.weights
                .get(w.id as usize)
                .and_then(|cw| matmul::quantized_partner(&cw.view()))
        };
        let Some(k) = key(w).filter(|_| graph.nodes[i].rows == 1) else {
            return Vec::new();
        };
        let mut group = vec![i];
        let end = (i + 1 + LOOKAHEAD).min(graph.nodes.len());
        for (j, node) in graph.nodes.iter().enumerate().take(end).skip(i + 1) {
            if let Op::MatMul { w: w2, x: x2 } = &node.op {
                if x2 == x && !done[j] && node.rows == 1 && key(w2) == Some(k) {
                    group.push(j);
                }
            }
        }
        group
    }

    /// Computes the products of a [`Self::matvec_group`] into `outs` (one per node).
    fn run_matvec_group(
        &mut self,
        graph: &Graph,
        group: &[usize],
        outs: &mut [Vec<f32>],
    ) -> Result<()> {
        let mut act = std::mem::take(&mut self.act);
        let r = self.matvec_group_into(graph, group, outs, &mut act);
        self.act = act;
        r
    }

    fn matvec_group_into(
        &self,
        graph: &Graph,
        group: &[usize],
        outs: &mut [Vec<f32>],
        act: &mut Vec<u8>,
    ) -> Result<()> {
        let mut views = Vec::with_capacity(group.len());
        let mut input = None;
        for &j in group {
            let Op::MatMul { w, x } = &graph.nodes[j].op else {
                return Err(BackendError::InvalidStep(
                    "a grouped node is not a product".into(),
                ));
            };
            views.push(self.weight(w)?.view());
            input = Some(*x);
        }
        let x = &self.bufs[input.map_or(0, |t| t.0 as usize)];
        let mut slices: Vec<&mut [f32]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
        matmul::matvec_many(&self.pool, &views, x, &mut slices, act)
    }

    fn run_node(
        &mut self,
        graph: &Graph,
        i: usize,
        batch: &StepBatch,
        out: &mut [f32],
    ) -> Result<()> {
        let node = &graph.nodes[i];
        let buf = |t: &super::TensorId| -> &[f32] { &self.bufs[t.0 as usize] };
        match &node.op {
            Op::Embed { table, scale } => {
                let w = self.weight(table)?;
                matmul::embed(&w.view(), batch.tokens, *scale, out)?;
            }
            Op::MatMul { w, x } => {
                let cw = &self.weights[w.id as usize];
                if node.rows >= GEMM_MIN_ROWS && cw.ty == GgmlType::F32 && gemm_f32::available() {
                    let packed = cw.packed.get_or_init(|| {
                        let v = cw.view();
                        let f: &[f32] = bytemuck::try_cast_slice(v.data).ok()?;
                        (f.len() >= v.rows * v.cols).then(|| gemm_f32::pack(f, v.rows, v.cols))
                    });
                    if let Some(p) = packed {
                        if gemm_f32::product(&self.pool, p, buf(x), node.rows, out) {
                            return Ok(());
                        }
                    }
                }
                if node.rows >= F16_GEMM_MIN_ROWS && cw.ty == GgmlType::F16 {
                    let v = cw.view();
                    let (x, n) = (buf(x), node.rows);
                    if gemm_f32::product_f16(&self.pool, v.data, v.rows, v.cols, x, n, out) {
                        return Ok(());
                    }
                }
                let mut act = std::mem::take(&mut self.act);
                let r = matmul::matmul(&self.pool, &cw.view(), buf(x), node.rows, out, &mut act);
                self.act = act;
                r?;
            }
            Op::AddBias { x, b } => {
                let b = self.vector(b)?;
                for (orow, xrow) in out
                    .chunks_exact_mut(node.cols)
                    .zip(buf(x).chunks_exact(node.cols))
                {
                    for ((o, &xv), &bv) in orow.iter_mut().zip(xrow).zip(b) {
                        *o = xv + bv;
                    }
                }
            }
            Op::RmsNorm { x, w, eps, group } => {
                let w = w.as_ref().map(|w| self.vector(w)).transpose()?;
                ops::rms_norm(buf(x), out, w, *eps, *group);
            }
            Op::LayerNorm { x, w, b, eps } => {
                let w = w.as_ref().map(|w| self.vector(w)).transpose()?;
                let b = b.as_ref().map(|b| self.vector(b)).transpose()?;
                ops::layer_norm(buf(x), out, node.cols, w, b, *eps);
            }
            Op::Rope {
                x,
                head_dim,
                n_rot,
                base,
                neox,
                freq_factors,
            } => {
                out.copy_from_slice(buf(x));
                let ff = freq_factors.as_ref().map(|w| self.vector(w)).transpose()?;
                let key = (base.to_bits(), *n_rot, freq_factors.map(|w| w.id));
                let at = match self.rope_tables.iter().position(|(k, _)| *k == key) {
                    Some(at) => at,
                    None => {
                        let t = ops::rope_table(batch.positions, *n_rot, *base, ff);
                        self.rope_tables.push((key, t));
                        self.rope_tables.len() - 1
                    }
                };
                let table = &self.rope_tables[at].1;
                ops::rope_apply(out, node.cols, table, *head_dim, *n_rot, *neox);
            }
            Op::RopeMulti {
                x,
                head_dim,
                n_rot,
                base,
                sections,
                kind,
                positions,
            } => {
                out.copy_from_slice(buf(x));
                let key = (
                    positions.as_ptr() as usize,
                    *n_rot,
                    base.to_bits(),
                    *sections,
                    *kind,
                );
                let at = match self.multi_tables.iter().position(|(k, _)| *k == key) {
                    Some(at) => at,
                    None => {
                        let t = ops::rope_multi_table(positions, *n_rot, *base, *sections, *kind);
                        self.multi_tables.push((key, t));
                        self.multi_tables.len() - 1
                    }
                };
                let table = &self.multi_tables[at].1;
                let neox = *kind != super::MultiRope::Video;
                ops::rope_apply(out, node.cols, table, *head_dim, *n_rot, neox);
            }
            Op::AddRow { x, row } => {
                let r = buf(row);
                for (o, xr) in out
                    .chunks_exact_mut(node.cols)
                    .zip(buf(x).chunks_exact(node.cols))
                {
                    zip2(o, xr, r, |a, b| a + b);
                }
            }
            Op::MulRow { x, row } => {
                let r = buf(row);
                for (o, xr) in out
                    .chunks_exact_mut(node.cols)
                    .zip(buf(x).chunks_exact(node.cols))
                {
                    zip2(o, xr, r, |a, b| a * b);
                }
            }
            Op::SliceCols { x, start } => {
                let in_cols = graph.shape(*x).1;
                for (o, xr) in out
                    .chunks_exact_mut(node.cols)
                    .zip(buf(x).chunks_exact(in_cols))
                {
                    o.copy_from_slice(&xr[*start..*start + node.cols]);
                }
            }
            Op::KvStore { kv, layer, k, v } => {
                let (k, v) = (k.0 as usize, v.0 as usize);
                let (kb, vb) = (&self.bufs[k], &self.bufs[v]);
                let cache = self.caches.get_mut(kv.0 as usize).ok_or_else(|| {
                    BackendError::InvalidStep(format!("unknown KV cache {}", kv.0))
                })?;
                cache.store(*layer, kb, vb, batch.positions, batch.seqs)?;
            }
            Op::Attention {
                q,
                kv,
                layer,
                n_head,
                scale,
                ..
            } => {
                let cache = self.cache(*kv)?;
                let ends = graph.attend_ends(batch.positions);
                cache.attend_until(
                    &self.pool,
                    *layer,
                    buf(q),
                    *n_head,
                    *scale,
                    batch.positions,
                    &ends,
                    batch.seqs,
                    out,
                )?;
            }
            Op::Add { a, b } => zip2(out, buf(a), buf(b), |x, y| x + y),
            Op::Mul { a, b } => zip2(out, buf(a), buf(b), |x, y| x * y),
            Op::Scale { x, s } => map1(out, buf(x), |v| v * s),
            Op::SoftCap { x, cap } => simd::soft_cap(out, buf(x), *cap),
            Op::Gelu { x } => map1(out, buf(x), ops::gelu),
            Op::Silu { x } => map1(out, buf(x), ops::silu),
            Op::GeGlu { gate, up } => zip2(out, buf(gate), buf(up), |g, u| ops::gelu(g) * u),
            Op::SwiGlu { gate, up } => zip2(out, buf(gate), buf(up), |g, u| ops::silu(g) * u),
            Op::Softmax { x } => {
                out.copy_from_slice(buf(x));
                for row in out.chunks_exact_mut(node.cols) {
                    ops::softmax(row);
                }
            }
            Op::SelectRows { x, rows } => {
                let src = buf(x);
                for (o, &r) in out.chunks_exact_mut(node.cols).zip(rows) {
                    let r = r as usize;
                    o.copy_from_slice(&src[r * node.cols..(r + 1) * node.cols]);
                }
            }
            Op::EmbedRows { table, by } => {
                let w = self.weight(table)?;
                let fixed;
                let ids = match by {
                    super::RowIndex::Positions => encoder::position_rows(batch.positions, w.rows)?,
                    super::RowIndex::Fixed(r) => {
                        fixed = vec![*r; node.rows];
                        &fixed
                    }
                };
                matmul::embed(&w.view(), ids, 1.0, out)?;
            }
            Op::GeluErf { x } => encoder::gelu_erf_all(&self.pool, buf(x), out),
            Op::EncoderAttention {
                q,
                k,
                v,
                n_head,
                n_head_kv,
                head_dim,
                scale,
                spans,
                keys,
            } => {
                let shape = encoder_attn::AttnShape {
                    n_head: *n_head,
                    n_head_kv: *n_head_kv,
                    head_dim: *head_dim,
                    scale: *scale,
                };
                encoder_attn::encoder_attention(
                    &self.pool,
                    buf(q),
                    buf(k),
                    buf(v),
                    shape,
                    spans,
                    keys.as_deref(),
                    out,
                );
            }
            Op::Pool { x, spans, mode } => {
                encoder::pool_rows(buf(x), node.cols, spans, *mode, out);
            }
            Op::Input { data } => out.copy_from_slice(data),
            Op::AvgPool2d {
                x,
                width,
                height,
                k,
            } => grid_pool::avg_pool_2d(buf(x), node.cols, *width, *height, *k, out),
            Op::TopK { x, k } => {
                let src = buf(x);
                let in_cols = graph.shape(*x).1;
                let mut ids = Vec::with_capacity(node.rows * k);
                for (o, row) in out.chunks_exact_mut(*k).zip(src.chunks_exact(in_cols)) {
                    for (j, (id, v)) in ops::top_k(row, *k).into_iter().enumerate() {
                        ids.push(id);
                        o[j] = v;
                    }
                }
                self.ids[i] = ids;
            }
        }
        Ok(())
    }
}

fn map1(out: &mut [f32], x: &[f32], f: impl Fn(f32) -> f32) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
}

fn zip2(out: &mut [f32], a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = f(x, y);
    }
}

#[cfg(test)]
mod attention_tests;
