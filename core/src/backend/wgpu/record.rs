//! Recording a step: each graph node becomes one or more kernel dispatches (or buffer copies);
//! [`Recorder::submit`] encodes them all into one command encoder and submits once;
//! [`Recorder::finish`] then reads back the graph's outputs (blocking; the browser awaits them
//! through `super::pending` instead).

use super::device::Gpu;
use super::kv::GpuKvCache;
use super::pipelines::{quant_kind, Kernel, Pipelines};
use super::weights::GpuWeight;
use super::StepStats;
use crate::backend::{
    BackendError, Graph, KvDtype, Op, OutputShape, PoolMode, Readback, Result, RowIndex, SeqSpan,
    StepBatch, TensorId, Weight,
};
use crate::dtype::GgmlType;
use crate::quant;

/// Uniform offsets are aligned to this (the largest `min_uniform_buffer_offset_alignment`
/// WebGPU allows).
const PARAM_ALIGN: usize = 256;
/// Most workgroups along one dispatch dimension.
const MAX_GROUPS: u32 = 65535;

/// Weight rows and tokens of one workgroup's tile in the tiled product (`RT`, `TT` in
/// matmul_tiled.wgsl).
const TILE_ROWS: usize = 64;
const TILE_TOKENS: usize = 16;

/// Buffers reused from step to step.
pub(super) struct BufferPool {
    acts: Vec<Option<wgpu::Buffer>>,
    ids: Vec<Option<wgpu::Buffer>>,
    step: [Option<wgpu::Buffer>; 4],
    params: Option<wgpu::Buffer>,
    staging: Vec<Option<wgpu::Buffer>>,
    /// RoPE frequency factors by (pairs, factors weight).
    rope: std::collections::HashMap<(usize, Option<u32>), wgpu::Buffer>,
    /// Bound where a kernel's optional input is absent.
    dummy: wgpu::Buffer,
    /// The CPU backend's GELU of every f16 value (see elementwise.wgsl), made on first use.
    gelu: Option<wgpu::Buffer>,
}

fn ensure(
    slot: &mut Option<wgpu::Buffer>,
    device: &wgpu::Device,
    size: u64,
    usage: wgpu::BufferUsages,
    label: &str,
) -> wgpu::Buffer {
    let size = size.max(16).div_ceil(16) * 16;
    match slot {
        Some(b) if b.size() >= size => b.clone(),
        _ => {
            let b = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            });
            *slot = Some(b.clone());
            b
        }
    }
}

const ACT: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

impl BufferPool {
    pub fn new(device: &wgpu::Device) -> Self {
        BufferPool {
            acts: Vec::new(),
            ids: Vec::new(),
            step: [None, None, None, None],
            params: None,
            staging: Vec::new(),
            rope: Default::default(),
            dummy: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("dummy"),
                size: 16,
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            }),
            gelu: None,
        }
    }

    /// The GELU table, uploaded once (256 KiB).
    fn gelu_table(&mut self, device: &wgpu::Device) -> wgpu::Buffer {
        self.gelu
            .get_or_insert_with(|| {
                let table: Vec<f32> = (0..=u16::MAX)
                    .map(|bits| crate::backend::cpu::gelu(half::f16::from_bits(bits).to_f32()))
                    .collect();
                super::weights::storage_with(device, "gelu", bytemuck::cast_slice(&table))
            })
            .clone()
    }
}

enum Cmd {
    Dispatch {
        kernel: Kernel,
        bufs: Vec<wgpu::Buffer>,
        params: u64,
        groups: (u32, u32, u32),
    },
    Copy {
        src: wgpu::Buffer,
        src_off: u64,
        dst: wgpu::Buffer,
        dst_off: u64,
        size: u64,
    },
}

/// Spreads `n` workgroups over x and y.
fn grid(n: usize) -> (u32, u32) {
    let n = n.max(1) as u64;
    let gx = n.min(MAX_GROUPS as u64);
    (gx as u32, n.div_ceil(gx) as u32)
}

fn invalid(msg: String) -> BackendError {
    BackendError::InvalidStep(msg)
}

/// The commands of one step, before encoding.
pub(super) struct Recorder<'a> {
    gpu: &'a Gpu,
    pipelines: &'a mut Pipelines,
    weights: &'a [GpuWeight],
    caches: &'a [GpuKvCache],
    pool: &'a mut BufferPool,
    batch: &'a StepBatch<'a>,
    cmds: Vec<Cmd>,
    params: Vec<u8>,
    tokens: wgpu::Buffer,
    positions: wgpu::Buffer,
    seqs: wgpu::Buffer,
    /// Per row, the last cached position its attention sees ([`Graph::attend_ends`]): its own
    /// position, or a bidirectional range's last one (an image's rows).
    ends: wgpu::Buffer,
    ends_host: Vec<u32>,
    /// The buffer holding each node's result in this step.
    tensors: Vec<Option<wgpu::Buffer>>,
    /// Per node: the last node that reads it (usize::MAX for graph outputs).
    last_use: Vec<usize>,
    /// Per pooled buffer: the last node reading its current tenant.
    busy_until: Vec<usize>,
    /// Use the barrier-free one-row-per-invocation product.
    row_per_invocation: bool,
    /// Quantized copies of activations (and their block sums) by (tensor, block size).
    quantized: std::collections::HashMap<(u32, u32), (wgpu::Buffer, wgpu::Buffer)>,
    /// The node being recorded.
    current: usize,
    /// `Op::RopeMulti` tables uploaded this step, by (positions' address, rotated dims, base
    /// bits, sections, kind): every layer rotates by the same table.
    multi_tables: std::collections::HashMap<MultiKey, wgpu::Buffer>,
}

type MultiKey = (usize, usize, u32, [u32; 4], crate::backend::MultiRope);

impl<'a> Recorder<'a> {
    /// Starts a step: uploads the batch's tokens, positions, sequence slots and attention ends.
    // Everything a step borrows from the backend, passed once per step; a struct would only rename it.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &'a Gpu,
        pipelines: &'a mut Pipelines,
        weights: &'a [GpuWeight],
        caches: &'a [GpuKvCache],
        pool: &'a mut BufferPool,
        batch: &'a StepBatch<'a>,
        graph: &Graph,
        row_per_invocation: bool,
    ) -> Result<Self> {
        let n = batch.tokens.len() as u64 * 4;
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        let ends_host = graph.attend_ends(batch.positions);
        let ends = &ends_host;
        let mut bufs = Vec::new();
        for (i, (data, label)) in [
            (batch.tokens, "tokens"),
            (batch.positions, "positions"),
            (batch.seqs, "seqs"),
            (&ends[..], "attention ends"),
        ]
        .into_iter()
        .enumerate()
        {
            let b = ensure(&mut pool.step[i], &gpu.device, n, usage, label);
            gpu.queue.write_buffer(&b, 0, bytemuck::cast_slice(data));
            bufs.push(b);
        }
        let ends = bufs.pop().unwrap();
        let seqs = bufs.pop().unwrap();
        let positions = bufs.pop().unwrap();
        let tokens = bufs.pop().unwrap();
        Ok(Recorder {
            gpu,
            pipelines,
            weights,
            caches,
            pool,
            batch,
            cmds: Vec::new(),
            params: Vec::new(),
            tokens,
            positions,
            seqs,
            ends,
            ends_host,
            tensors: vec![None; graph.nodes.len()],
            last_use: graph.last_uses(),
            busy_until: Vec::new(),
            row_per_invocation,
            quantized: Default::default(),
            current: 0,
            multi_tables: Default::default(),
        })
    }

    fn weight(&self, w: &Weight) -> Result<&'a GpuWeight> {
        self.weights
            .get(w.id as usize)
            .ok_or_else(|| invalid(format!("unknown weight handle {}", w.id)))
    }

    /// A weight used as a vector (norm weight, bias): one f32 chunk.
    fn vector(&self, w: &Weight, len: usize) -> Result<wgpu::Buffer> {
        let g = self.weight(w)?;
        if g.chunks.len() != 1 || g.cols * g.rows != len || g.ty != crate::dtype::GgmlType::F32 {
            return Err(BackendError::BadTensor {
                name: g.name.clone(),
                message: format!("used as a vector of {len} but it is {}×{}", g.rows, g.cols),
            });
        }
        Ok(g.chunks[0].buf.clone())
    }

    fn input(&self, t: TensorId) -> Result<wgpu::Buffer> {
        self.tensors
            .get(t.0 as usize)
            .and_then(|b| b.clone())
            .ok_or_else(|| invalid(format!("tensor {} is used before it is computed", t.0)))
    }

    /// The activations a product with a `file_ty` weight reads: as they are, or quantized to
    /// the CPU backend's partner type (`quant::dot::vec_dot_type`) as integer quants (packed
    /// 8-bit, four to a u32 word: actquant.wgsl), computed once per (tensor, type) and shared
    /// by every product reading them (e.g. Q, K and V).
    /// Also, per 32 elements, the block scale and the sum Q8_1 activations store (the dummy
    /// buffer when the activations are not quantized).
    fn quantized_input(
        &mut self,
        x: TensorId,
        file_ty: GgmlType,
        graph: &Graph,
    ) -> Result<(wgpu::Buffer, wgpu::Buffer, bool)> {
        let vdt = quant::dot::vec_dot_type(file_ty);
        let uses_partner = quant::dot::supports_vec_dot(file_ty) && quant::can_quantize(vdt);
        let (kernel, block) = match vdt {
            GgmlType::Q8_0 | GgmlType::Q8_1 if uses_partner => (Kernel::ActQ8_0, 32),
            GgmlType::Q8_K if uses_partner => (Kernel::ActQ8K, 256),
            _ => return Ok((self.input(x)?, self.pool.dummy.clone(), false)),
        };
        let key = (x.0, block as u32);
        if let Some((q, sums)) = self.quantized.get(&key) {
            return Ok((q.clone(), sums.clone(), true));
        }
        let (rows, cols) = graph.shape(x);
        if !cols.is_multiple_of(block) {
            return Err(invalid(format!(
                "a product over {cols} columns cannot use {vdt} activations"
            )));
        }
        let src = self.input(x)?;
        let until = self.last_use[x.0 as usize];
        // One byte per quant (cols is a multiple of 32: whole words).
        let out = self.alloc((rows * cols) as u64, until);
        let sums = self.alloc((rows * cols / 32 * 8) as u64, until);
        let n_blocks = rows * cols / block;
        let (gx, gy) = grid(n_blocks.div_ceil(64));
        self.dispatch(
            kernel,
            vec![src, out.clone(), sums.clone()],
            &[n_blocks as u32, gx * 64, 0, 0],
            (gx, gy, 1),
        );
        self.quantized.insert(key, (out.clone(), sums.clone()));
        Ok((out, sums, true))
    }

    /// The buffer node `i` writes: a pooled buffer whose previous tenant is no longer read
    /// (activations are recycled within the step, so memory stays a few layers' worth).
    fn output(&mut self, i: usize, bytes: usize) -> wgpu::Buffer {
        let until = self.last_use[i].max(i);
        let b = self.alloc(bytes as u64, until);
        self.tensors[i] = Some(b.clone());
        b
    }

    /// A pooled buffer of at least `bytes`, busy until node `until` has run.
    fn alloc(&mut self, bytes: u64, until: usize) -> wgpu::Buffer {
        let i = self.current;
        let free = |j: &usize| self.busy_until[*j] < i;
        let fits = (0..self.busy_until.len())
            .filter(free)
            .filter(|&j| {
                self.pool.acts[j]
                    .as_ref()
                    .is_some_and(|b| b.size() >= bytes)
            })
            .min_by_key(|&j| self.pool.acts[j].as_ref().map_or(0, |b| b.size()));
        let slot = match fits.or_else(|| (0..self.busy_until.len()).find(free)) {
            Some(j) => j,
            None => {
                self.busy_until.push(0);
                if self.pool.acts.len() < self.busy_until.len() {
                    self.pool.acts.push(None);
                }
                self.busy_until.len() - 1
            }
        };
        self.busy_until[slot] = until;
        ensure(
            &mut self.pool.acts[slot],
            &self.gpu.device,
            bytes,
            ACT,
            "activation",
        )
    }

    fn push_params(&mut self, words: &[u32]) -> u64 {
        let off = self.params.len();
        self.params.extend_from_slice(bytemuck::cast_slice(words));
        self.params.resize(off + PARAM_ALIGN, 0);
        off as u64
    }

    fn dispatch(
        &mut self,
        kernel: Kernel,
        bufs: Vec<wgpu::Buffer>,
        params: &[u32],
        groups: (u32, u32, u32),
    ) {
        let params = self.push_params(params);
        self.cmds.push(Cmd::Dispatch {
            kernel,
            bufs,
            params,
            groups,
        });
    }

    /// `out = f(a, b)` element-wise (see elementwise.wgsl for the op codes).
    // The op code, operands and shape of one dispatch, as the shader's uniform takes them.
    #[allow(clippy::too_many_arguments)]
    fn elementwise(
        &mut self,
        op: u32,
        a: wgpu::Buffer,
        b: Option<wgpu::Buffer>,
        out: wgpu::Buffer,
        n: usize,
        s: f32,
        cols: usize,
    ) {
        let (gx, gy) = grid(n.div_ceil(256));
        let b = b.unwrap_or_else(|| a.clone());
        let table = self.pool.gelu_table(&self.gpu.device);
        let p = [n as u32, op, s.to_bits(), cols as u32, gx * 256, 0, 0, 0];
        self.dispatch(Kernel::Elementwise, vec![a, b, out, table], &p, (gx, gy, 1));
    }

    /// Records node `i` of `graph`.
    pub fn node(&mut self, graph: &Graph, i: usize) -> Result<()> {
        let node = &graph.nodes[i];
        let (rows, cols) = (node.rows, node.cols);
        let n_tok = self.batch.tokens.len();
        self.current = i;
        match &node.op {
            Op::Embed { table, scale } => {
                let w = self.weight(table)?;
                if let Some(&id) = self.batch.tokens.iter().find(|&&t| t as usize >= w.rows) {
                    return Err(invalid(format!(
                        "token id {id} is outside the vocabulary ({} entries)",
                        w.rows
                    )));
                }
                let out = self.output(i, rows * cols * 4);
                for c in &w.chunks {
                    let p = [
                        c.rows as u32,
                        w.cols as u32,
                        n_tok as u32,
                        w.row_bytes as u32,
                        c.row0 as u32,
                        scale.to_bits(),
                        0,
                        0,
                    ];
                    let groups = ((w.cols / 32).div_ceil(64) as u32, n_tok as u32, 1);
                    let bufs = vec![c.buf.clone(), self.tokens.clone(), out.clone()];
                    self.dispatch(Kernel::Embed(w.ty), bufs, &p, groups);
                }
            }
            Op::MatMul { w, x } => {
                let w = self.weight(w)?;
                let (x, xs, act_q) = self.quantized_input(*x, w.file_ty, graph)?;
                let out = self.output(i, rows * cols * 4);
                // Invocations per row (see matmul.wgsl): one with the barrier-free kernel; else
                // 16 (the lane accumulators) for 32-element blocks, one per K block (at most
                // 16), and for float weights as many as the row has 32-element units; powers of
                // two, at most 64.
                let units = w.cols / 32;
                let pow2_below = |n: usize| (n + 1).next_power_of_two() / 2;
                let tpr = if self.row_per_invocation {
                    1
                } else {
                    match quant_kind(w.ty) {
                        1 => 16,
                        2 | 3 => pow2_below(units / 8).min(16),
                        _ => pow2_below(units),
                    }
                };
                let tpr = tpr.clamp(1, 64);
                // Rows and tokens per workgroup (the tiled kernel's tile: matmul_tiled.wgsl).
                let tiled = !self.row_per_invocation && rows > 1 && quant_kind(w.ty) != 0;
                let (per_group, tok_tile) = if tiled {
                    (TILE_ROWS, TILE_TOKENS)
                } else {
                    (64 / tpr, 8)
                };
                let kernel = if tiled {
                    Kernel::MatMulTiled(w.ty)
                } else if self.row_per_invocation && rows > 1 {
                    Kernel::MatMulRowsTile(w.ty)
                } else if self.row_per_invocation {
                    Kernel::MatMulRows(w.ty)
                } else {
                    Kernel::MatMul(w.ty)
                };
                for c in &w.chunks {
                    let (gx, gy) = grid(c.rows.div_ceil(per_group));
                    let p = [
                        c.rows as u32,
                        w.cols as u32,
                        rows as u32,
                        w.row_bytes as u32,
                        w.rows as u32,
                        c.row0 as u32,
                        gx,
                        tpr as u32,
                        0, // `zero`: keeps products apart from additions
                        act_q as u32,
                        0,
                        0,
                    ];
                    let bufs = vec![c.buf.clone(), x.clone(), out.clone(), xs.clone()];
                    let gz = rows.div_ceil(tok_tile) as u32;
                    self.dispatch(kernel, bufs, &p, (gx, gy, gz));
                }
            }
            Op::AddBias { x, b } => {
                let b = self.vector(b, cols)?;
                let x = self.input(*x)?;
                let out = self.output(i, rows * cols * 4);
                self.elementwise(8, x, Some(b), out, rows * cols, 0.0, cols);
            }
            Op::RmsNorm { x, w, eps, group } => {
                self.norm(
                    i,
                    Kernel::RmsNorm,
                    *x,
                    w.as_ref(),
                    None,
                    *eps,
                    *group,
                    rows * cols,
                )?;
            }
            Op::LayerNorm { x, w, b, eps } => {
                self.norm(
                    i,
                    Kernel::LayerNorm,
                    *x,
                    w.as_ref(),
                    b.as_ref(),
                    *eps,
                    cols,
                    rows * cols,
                )?;
            }
            Op::Rope {
                x,
                head_dim,
                n_rot,
                base,
                neox,
                freq_factors,
            } => {
                let factors = self.rope_factors(*n_rot, freq_factors.as_ref())?;
                // The CPU backend's expression, so the shader's recurrence matches it bit for bit.
                let step = base.powf(-2.0 / *n_rot as f32);
                let x = self.input(*x)?;
                let out = self.output(i, rows * cols * 4);
                let n = rows * cols;
                let (gx, gy) = grid(n.div_ceil(256));
                let p = [
                    n as u32,
                    cols as u32,
                    *head_dim as u32,
                    *n_rot as u32,
                    *neox as u32,
                    gx * 256,
                    step.to_bits(),
                    0,
                ];
                let bufs = vec![x, self.positions.clone(), factors, out];
                self.dispatch(Kernel::Rope, bufs, &p, (gx, gy, 1));
            }
            Op::KvStore { kv, layer, k, v } => {
                let cache = self.cache(kv.0, *layer)?;
                let (c, l) = (cache, &cache.layers[*layer]);
                let s = &l.spec;
                let (wk, wv) = (s.n_kv_head * s.head_dim_k, s.n_kv_head * s.head_dim_v);
                if graph.shape(*k).1 != wk || graph.shape(*v).1 != wv {
                    return Err(invalid(format!(
                        "layer {layer}: key/value rows do not match the cache width"
                    )));
                }
                for (&pos, &seq) in self.batch.positions.iter().zip(self.batch.seqs) {
                    if seq as usize >= c.n_seq {
                        return Err(invalid(format!(
                            "sequence slot {seq} does not exist (the cache has {})",
                            c.n_seq
                        )));
                    }
                    if s.window.is_none() && pos as usize >= s.capacity {
                        return Err(BackendError::ContextFull {
                            seq,
                            pos: pos as usize,
                            capacity: s.capacity,
                        });
                    }
                    if s.window.is_none() && c.tables.slot(seq as usize, pos as usize).is_none() {
                        return Err(unmapped(*layer, seq, pos));
                    }
                }
                let kernel = match c.dtype {
                    KvDtype::F16 => Kernel::KvStoreF16,
                    KvDtype::F32 => Kernel::KvStoreF32,
                };
                let bufs = vec![
                    self.input(*k)?,
                    self.input(*v)?,
                    self.positions.clone(),
                    self.seqs.clone(),
                    l.k.clone(),
                    l.v.clone(),
                    c.table_buf.clone(),
                ];
                let p = [
                    n_tok as u32,
                    wk as u32,
                    wv as u32,
                    s.capacity as u32,
                    s.window.is_none() as u32,
                    c.tables.per_seq() as u32,
                    0,
                    0,
                ];
                let groups = ((wk.max(wv) / 2).div_ceil(64) as u32, n_tok as u32, 1);
                self.dispatch(kernel, bufs, &p, groups);
            }
            Op::Attention {
                q,
                kv,
                layer,
                n_head,
                scale,
                ..
            } => {
                let c = self.cache(kv.0, *layer)?;
                let l = &c.layers[*layer];
                let s = &l.spec;
                let (hk, hv, n_kv) = (s.head_dim_k, s.head_dim_v, s.n_kv_head);
                if n_kv == 0 || !n_head.is_multiple_of(n_kv) || graph.shape(*q).1 != n_head * hk {
                    return Err(invalid(format!(
                        "layer {layer}: {n_head} query heads of {hk} do not fit {n_kv} key/value heads"
                    )));
                }
                if hk > 256 || hv > 256 {
                    return Err(BackendError::Unsupported(format!(
                        "layer {layer}: the GPU attention kernel takes heads of at most 256 elements"
                    )));
                }
                let rows_at = self.batch.positions.iter().zip(self.batch.seqs);
                for ((&pos, &seq), &end) in rows_at.zip(&self.ends_host) {
                    // A row of a bidirectional range sees past its own position, up to `end`;
                    // a window's ring must hold all of that.
                    let span = s
                        .window
                        .map_or(pos as usize + 1, |w| w.min(pos as usize + 1))
                        + end.saturating_sub(pos) as usize;
                    if span > s.capacity || seq as usize >= c.n_seq {
                        return Err(invalid(format!(
                            "layer {layer}: sequence {seq} position {pos} (attending to {end}) \
                             is outside the cache"
                        )));
                    }
                    // Tables are mapped from their start: a mapped last position means every
                    // position the row attends to is.
                    if s.window.is_none() && c.tables.slot(seq as usize, end as usize).is_none() {
                        return Err(unmapped(*layer, seq, end));
                    }
                }
                let kernel = match c.dtype {
                    KvDtype::F16 => Kernel::AttentionF16,
                    KvDtype::F32 => Kernel::AttentionF32,
                };
                let (lk, lv) = (l.k.clone(), l.v.clone());
                let q = self.input(*q)?;
                let out = self.output(i, rows * cols * 4);
                let (gx, gy) = grid(n_tok * n_head);
                let p = [
                    *n_head as u32,
                    n_kv as u32,
                    hk as u32,
                    hv as u32,
                    s.capacity as u32,
                    s.window.unwrap_or(0) as u32,
                    scale.to_bits(),
                    n_tok as u32,
                    gx,
                    0,
                    c.tables.per_seq() as u32,
                    0,
                ];
                let tables = c.table_buf.clone();
                let bufs = vec![
                    q,
                    lk,
                    lv,
                    self.positions.clone(),
                    self.seqs.clone(),
                    out,
                    tables,
                    self.ends.clone(),
                ];
                self.dispatch(kernel, bufs, &p, (gx, gy, 1));
            }
            Op::Add { a, b } => self.binary(i, 0, *a, *b, rows * cols)?,
            Op::Mul { a, b } => self.binary(i, 1, *a, *b, rows * cols)?,
            Op::GeGlu { gate, up } => self.binary(i, 6, *gate, *up, rows * cols)?,
            Op::SwiGlu { gate, up } => self.binary(i, 7, *gate, *up, rows * cols)?,
            Op::Scale { x, s } => self.unary(i, 2, *x, *s, rows * cols)?,
            Op::SoftCap { x, cap } => self.unary(i, 3, *x, *cap, rows * cols)?,
            Op::Gelu { x } => self.unary(i, 4, *x, 0.0, rows * cols)?,
            Op::Silu { x } => self.unary(i, 5, *x, 0.0, rows * cols)?,
            Op::GeluErf { x } => self.unary(i, 9, *x, 0.0, rows * cols)?,
            Op::EmbedRows { table, by } => self.embed_rows(i, table, *by)?,
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
                let shape = (*n_head, *n_head_kv, *head_dim, *scale);
                self.encoder_attention(i, rows, [*q, *k, *v], shape, spans, keys.as_deref())?
            }
            Op::Pool { x, spans, mode } => self.pool(i, *x, spans, *mode, cols)?,
            Op::Input { data } => self.host_rows(i, data),
            Op::AvgPool2d { x, width, k, .. } => self.avg_pool_2d(i, *x, *width, *k, rows, cols)?,
            Op::RopeMulti {
                x,
                head_dim,
                n_rot,
                base,
                sections,
                kind,
                positions,
            } => {
                // The CPU backend's angles, formed on the host once per step.
                let key = (
                    positions.as_ptr() as usize,
                    *n_rot,
                    base.to_bits(),
                    *sections,
                    *kind,
                );
                let t = match self.multi_tables.get(&key) {
                    Some(t) => t.clone(),
                    None => {
                        let table = crate::backend::cpu::ops::rope_multi_table(
                            positions, *n_rot, *base, *sections, *kind,
                        );
                        let flat: Vec<f32> = table.iter().flat_map(|&(c, s)| [c, s]).collect();
                        let t = super::weights::storage_with(
                            &self.gpu.device,
                            "rope table",
                            bytemuck::cast_slice(&flat),
                        );
                        self.multi_tables.insert(key, t.clone());
                        t
                    }
                };
                let interleaved = u32::from(*kind == crate::backend::MultiRope::Video);
                let x = self.input(*x)?;
                let out = self.output(i, rows * cols * 4);
                let n = rows * cols;
                let (gx, gy) = grid(n.div_ceil(256));
                let p = [
                    n as u32,
                    cols as u32,
                    *head_dim as u32,
                    *n_rot as u32,
                    gx * 256,
                    0,
                    interleaved,
                    0,
                ];
                self.dispatch(Kernel::RopeTable, vec![x, t, out], &p, (gx, gy, 1));
            }
            Op::Softmax { x } => {
                if rows > MAX_GROUPS as usize {
                    return Err(BackendError::Unsupported(
                        "softmax over more than 65535 rows".into(),
                    ));
                }
                let x = self.input(*x)?;
                let out = self.output(i, rows * cols * 4);
                let p = [cols as u32, rows as u32, 0, 0];
                self.dispatch(Kernel::Softmax, vec![x, out], &p, (rows as u32, 1, 1));
            }
            Op::AddRow { x, row } | Op::MulRow { x, row } => {
                let op = if matches!(node.op, Op::AddRow { .. }) {
                    8
                } else {
                    10
                };
                let (x, row) = (self.input(*x)?, self.input(*row)?);
                let out = self.output(i, rows * cols * 4);
                self.elementwise(op, x, Some(row), out, rows * cols, 0.0, cols);
            }
            Op::SliceCols { x, start } => {
                // A copy per row, as `SelectRows` (one row for a timestep's modulations).
                let src = self.input(*x)?;
                let in_row = (graph.shape(*x).1 * 4) as u64;
                let dst = self.output(i, rows * cols * 4);
                let row = (cols * 4) as u64;
                for r in 0..rows as u64 {
                    self.cmds.push(Cmd::Copy {
                        src: src.clone(),
                        src_off: r * in_row + *start as u64 * 4,
                        dst: dst.clone(),
                        dst_off: r * row,
                        size: row,
                    });
                }
            }
            Op::SelectRows { x, rows: sel } => {
                let src = self.input(*x)?;
                let dst = self.output(i, rows * cols * 4);
                let row = (cols * 4) as u64;
                for (j, &r) in sel.iter().enumerate() {
                    self.cmds.push(Cmd::Copy {
                        src: src.clone(),
                        src_off: r as u64 * row,
                        dst: dst.clone(),
                        dst_off: j as u64 * row,
                        size: row,
                    });
                }
            }
            Op::TopK { x, k } => {
                if rows > MAX_GROUPS as usize {
                    return Err(BackendError::Unsupported(
                        "top-k over more than 65535 rows".into(),
                    ));
                }
                let in_cols = graph.shape(*x).1;
                let x = self.input(*x)?;
                let vals = self.output(i, rows * k * 4);
                if self.pool.ids.len() <= i {
                    self.pool.ids.resize(i + 1, None);
                }
                let ids = ensure(
                    &mut self.pool.ids[i],
                    &self.gpu.device,
                    (rows * k * 4) as u64,
                    ACT,
                    "top-k ids",
                );
                let p = [in_cols as u32, *k as u32, 0, 0];
                self.dispatch(Kernel::TopK, vec![x, vals, ids], &p, (rows as u32, 1, 1));
            }
        }
        Ok(())
    }

    /// The frequency factors of a RoPE configuration (ones when the model has none), uploaded
    /// once and cached. The angles themselves are formed in the shader (see rope.wgsl).
    fn rope_factors(&mut self, n_rot: usize, ff: Option<&Weight>) -> Result<wgpu::Buffer> {
        let half = n_rot / 2;
        let key = (half, ff.map(|w| w.id));
        if let Some(b) = self.pool.rope.get(&key) {
            return Ok(b.clone());
        }
        let factors = match ff {
            Some(w) => {
                let g = self.weight(w)?;
                match &g.host {
                    Some(v) if v.len() >= half => v[..half].to_vec(),
                    _ => {
                        return Err(BackendError::BadTensor {
                            name: g.name.clone(),
                            message: format!("RoPE frequency factors need {half} values"),
                        })
                    }
                }
            }
            None => vec![1.0; half.max(1)],
        };
        let b =
            super::weights::storage_with(&self.gpu.device, "rope", bytemuck::cast_slice(&factors));
        self.pool.rope.insert(key, b.clone());
        Ok(b)
    }

    fn cache(&self, kv: u32, layer: usize) -> Result<&'a GpuKvCache> {
        let c = self
            .caches
            .get(kv as usize)
            .ok_or_else(|| invalid(format!("unknown KV cache {kv}")))?;
        if layer >= c.layers.len() {
            return Err(invalid(format!("the KV cache has no layer {layer}")));
        }
        Ok(c)
    }

    /// Rows of a table by position or one fixed row (see `Op::EmbedRows`): the embedding
    /// gather with the positions (or a buffer of the fixed row) as its ids.
    fn embed_rows(&mut self, i: usize, table: &Weight, by: RowIndex) -> Result<()> {
        let w = self.weight(table)?;
        let n_tok = self.batch.tokens.len();
        let ids = match by {
            RowIndex::Positions => {
                if let Some(p) = self.batch.positions.iter().find(|&&p| p as usize >= w.rows) {
                    return Err(invalid(format!(
                        "position {p} is past the model's {} learned positions",
                        w.rows
                    )));
                }
                self.positions.clone()
            }
            RowIndex::Fixed(r) => {
                let ids = vec![r; n_tok];
                super::weights::storage_with(&self.gpu.device, "rows", bytemuck::cast_slice(&ids))
            }
        };
        let out = self.output(i, n_tok * w.cols * 4);
        for c in &w.chunks {
            let p = [
                c.rows as u32,
                w.cols as u32,
                n_tok as u32,
                w.row_bytes as u32,
                c.row0 as u32,
                1f32.to_bits(),
                0,
                0,
            ];
            let groups = ((w.cols / 32).div_ceil(64) as u32, n_tok as u32, 1);
            let bufs = vec![c.buf.clone(), ids.clone(), out.clone()];
            self.dispatch(Kernel::Embed(w.ty), bufs, &p, groups);
        }
        Ok(())
    }

    /// Bidirectional attention within spans (encoder_attention.wgsl): each row's span start
    /// and valid length are uploaded for the kernel.
    #[allow(clippy::too_many_arguments)]
    fn encoder_attention(
        &mut self,
        i: usize,
        rows: usize,
        [q, k, v]: [TensorId; 3],
        (n_head, n_head_kv, head_dim, scale): (usize, usize, usize, f32),
        spans: &[SeqSpan],
        keys: Option<&[SeqSpan]>,
    ) -> Result<()> {
        /// Elements per head the kernel takes (4 per invocation of a 64-wide workgroup).
        const MAX_HEAD_DIM: usize = 256;
        if head_dim > MAX_HEAD_DIM {
            return Err(BackendError::Unsupported(format!(
                "encoder attention with {head_dim} values per head (the GPU kernel takes at most \
                 {MAX_HEAD_DIM})"
            )));
        }
        let mut row_span = vec![0u32; 2 * rows];
        for (j, s) in spans.iter().enumerate() {
            // The keys of a cross-attention span lie in its key span of `k` / `v`.
            let key = keys.map_or(s, |ks| &ks[j]);
            for r in s.start..s.start + s.len {
                row_span[2 * r as usize] = key.start;
                row_span[2 * r as usize + 1] = key.valid;
            }
        }
        let spans_buf = super::weights::storage_with(
            &self.gpu.device,
            "spans",
            bytemuck::cast_slice(&row_span),
        );
        let (q, k, v) = (self.input(q)?, self.input(k)?, self.input(v)?);
        let out = self.output(i, rows * n_head * head_dim * 4);
        let (gx, gy) = grid(rows * n_head);
        let p = [
            n_head as u32,
            n_head_kv as u32,
            head_dim as u32,
            rows as u32,
            scale.to_bits(),
            gx,
            0,
            0,
        ];
        let bufs = vec![q, k, v, spans_buf, out];
        self.dispatch(Kernel::EncoderAttention, bufs, &p, (gx, gy, 1));
        Ok(())
    }

    /// Rows given by the caller (`Op::Input`), copied into the node's buffer.
    fn host_rows(&mut self, i: usize, data: &[f32]) {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let size = (bytes.len() as u64).div_ceil(4) * 4;
        let src = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("input rows"),
            size: size.max(4),
            usage: wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        {
            let mut view = src
                .slice(..)
                .get_mapped_range_mut()
                .expect("a buffer mapped at creation is mappable");
            view.slice(..bytes.len()).copy_from_slice(bytes);
        }
        src.unmap();
        let dst = self.output(i, bytes.len());
        self.cmds.push(Cmd::Copy {
            src,
            src_off: 0,
            dst,
            dst_off: 0,
            size,
        });
    }

    /// `k × k` average pooling of a grid of rows `width` wide (grid_pool.wgsl).
    fn avg_pool_2d(
        &mut self,
        i: usize,
        x: TensorId,
        width: usize,
        k: usize,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        let x = self.input(x)?;
        let out = self.output(i, rows * cols * 4);
        let inv = 1.0f32 / (k * k) as f32;
        let p = [
            cols as u32,
            width as u32,
            k as u32,
            rows as u32,
            inv.to_bits(),
            0,
            0,
            0,
        ];
        let gy = rows.clamp(1, MAX_GROUPS as usize);
        let groups = (
            cols.div_ceil(64) as u32,
            gy as u32,
            rows.div_ceil(gy) as u32,
        );
        self.dispatch(Kernel::GridPool, vec![x, out], &p, groups);
        Ok(())
    }

    /// One row per span (pool.wgsl).
    fn pool(
        &mut self,
        i: usize,
        x: TensorId,
        spans: &[SeqSpan],
        mode: PoolMode,
        cols: usize,
    ) -> Result<()> {
        if spans.len() > MAX_GROUPS as usize {
            return Err(BackendError::Unsupported(
                "pooling more than 65535 sequences in one step".into(),
            ));
        }
        let seqs: Vec<u32> = spans
            .iter()
            .flat_map(|s| [s.start, s.len, s.valid])
            .collect();
        let seqs =
            super::weights::storage_with(&self.gpu.device, "seqs", bytemuck::cast_slice(&seqs));
        let x = self.input(x)?;
        let out = self.output(i, spans.len() * cols * 4);
        let mode = match mode {
            PoolMode::Mean => 0,
            PoolMode::First => 1,
            PoolMode::Last => 2,
        };
        let p = [cols as u32, spans.len() as u32, mode, 0];
        let groups = (cols.div_ceil(64) as u32, spans.len() as u32, 1);
        self.dispatch(Kernel::Pool, vec![x, seqs, out], &p, groups);
        Ok(())
    }

    fn binary(&mut self, i: usize, op: u32, a: TensorId, b: TensorId, n: usize) -> Result<()> {
        let (a, b) = (self.input(a)?, self.input(b)?);
        let out = self.output(i, n * 4);
        self.elementwise(op, a, Some(b), out, n, 0.0, 1);
        Ok(())
    }

    fn unary(&mut self, i: usize, op: u32, x: TensorId, s: f32, n: usize) -> Result<()> {
        let x = self.input(x)?;
        let out = self.output(i, n * 4);
        self.elementwise(op, x, None, out, n, s, 1);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn norm(
        &mut self,
        i: usize,
        kernel: Kernel,
        x: TensorId,
        w: Option<&Weight>,
        b: Option<&Weight>,
        eps: f32,
        group: usize,
        n: usize,
    ) -> Result<()> {
        // The exact mean of squares (exact.wgsl) divides by the group size in 16-bit digits.
        if group == 0 || group >= 1 << 16 {
            return Err(invalid(format!(
                "normalisation groups of {group} elements are not supported (at most 65535)"
            )));
        }
        let wb = w.map(|w| self.vector(w, group)).transpose()?;
        let bb = b.map(|b| self.vector(b, group)).transpose()?;
        let x = self.input(x)?;
        let out = self.output(i, n * 4);
        let n_groups = n / group;
        let (gx, gy) = grid(n_groups);
        let p = [
            group as u32,
            n_groups as u32,
            eps.to_bits(),
            wb.is_some() as u32,
            bb.is_some() as u32,
            gx,
            0,
            0,
        ];
        let dummy = self.pool.dummy.clone();
        let bufs = vec![
            x,
            wb.unwrap_or_else(|| dummy.clone()),
            bb.unwrap_or(dummy),
            out,
        ];
        self.dispatch(kernel, bufs, &p, (gx, gy, 1));
        Ok(())
    }

    /// Encodes every command into one encoder and submits it once; the outputs are copied to
    /// staging buffers, to be mapped by the caller (blocking natively, awaited in the browser).
    pub fn submit(self, graph: &Graph) -> Result<(Submitted, StepStats)> {
        let device = &self.gpu.device;
        let mut stats = StepStats {
            submissions: 1,
            ..Default::default()
        };
        let params = ensure(
            &mut self.pool.params,
            device,
            self.params.len() as u64,
            wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            "params",
        );
        if !self.params.is_empty() {
            self.gpu.queue.write_buffer(&params, 0, &self.params);
        }
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        // Compile what this step needs, then build its bind groups.
        let mut groups = Vec::with_capacity(self.cmds.len());
        for cmd in &self.cmds {
            if let Cmd::Dispatch {
                kernel,
                bufs,
                params: off,
                ..
            } = cmd
            {
                let pipeline = self.pipelines.get(device, *kernel);
                let layout = pipeline.get_bind_group_layout(0);
                let mut entries: Vec<wgpu::BindGroupEntry> = bufs
                    .iter()
                    .enumerate()
                    .map(|(j, b)| wgpu::BindGroupEntry {
                        binding: j as u32,
                        resource: b.as_entire_binding(),
                    })
                    .collect();
                entries.push(wgpu::BindGroupEntry {
                    binding: bufs.len() as u32,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &params,
                        offset: *off,
                        size: wgpu::BufferSize::new(PARAM_ALIGN as u64),
                    }),
                });
                groups.push(Some(device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: None,
                    layout: &layout,
                    entries: &entries,
                })));
            } else {
                groups.push(None);
            }
        }
        let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("step"),
        });
        let mut c = 0;
        while c < self.cmds.len() {
            match &self.cmds[c] {
                Cmd::Copy {
                    src,
                    src_off,
                    dst,
                    dst_off,
                    size,
                } => {
                    enc.copy_buffer_to_buffer(src, *src_off, dst, *dst_off, *size);
                    stats.copies += 1;
                    c += 1;
                }
                Cmd::Dispatch { .. } => {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: None,
                        timestamp_writes: None,
                    });
                    while let Some(Cmd::Dispatch {
                        kernel,
                        groups: (x, y, z),
                        ..
                    }) = self.cmds.get(c)
                    {
                        pass.set_pipeline(self.pipelines.peek(*kernel));
                        pass.set_bind_group(0, groups[c].as_ref(), &[]);
                        pass.dispatch_workgroups(*x, *y, *z);
                        stats.dispatches += 1;
                        c += 1;
                    }
                }
            }
        }
        // Copy the outputs to mappable buffers.
        let mut reads: Vec<(OutputShape, wgpu::Buffer, u64, Option<u64>)> = Vec::new();
        for (j, t) in graph.outputs.iter().enumerate() {
            let node = &graph.nodes[t.0 as usize];
            let bytes = (node.rows * node.cols * 4) as u64;
            let is_topk = matches!(node.op, Op::TopK { .. });
            let total = if is_topk { 2 * bytes } else { bytes };
            if self.pool.staging.len() <= j {
                self.pool.staging.resize(j + 1, None);
            }
            let st = ensure(
                &mut self.pool.staging[j],
                device,
                total,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                "readback",
            );
            if bytes > 0 {
                let src = self.tensors[t.0 as usize]
                    .as_ref()
                    .ok_or_else(|| invalid("an output was never computed".into()))?;
                enc.copy_buffer_to_buffer(src, 0, &st, 0, bytes);
                stats.copies += 1;
                if is_topk {
                    let ids = self.pool.ids[t.0 as usize]
                        .as_ref()
                        .expect("top-k nodes have ids");
                    enc.copy_buffer_to_buffer(ids, 0, &st, bytes, bytes);
                    stats.copies += 1;
                }
            }
            stats.readback_bytes += total as usize;
            reads.push((graph.output_shape(*t), st, bytes, is_topk.then_some(bytes)));
        }
        self.gpu.queue.submit(Some(enc.finish()));
        Ok((Submitted { reads, scope }, stats))
    }

    /// Submits the step and reads the outputs back, blocking until the GPU is done.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn finish(self, graph: &Graph) -> Result<(Vec<Readback>, StepStats)> {
        let gpu = self.gpu;
        let (sub, stats) = self.submit(graph)?;
        if let Some(e) = super::device::block_on(sub.scope.pop()) {
            return Err(BackendError::Unsupported(format!(
                "GPU validation error: {e}"
            )));
        }
        let out = read_back(gpu, &sub.reads)?;
        Ok((out, stats))
    }
}

/// A submitted step: the validation scope still open and the staging buffers its outputs are
/// being copied to (output tensor, staging buffer, value bytes, id bytes of a top-k output).
pub(super) struct Submitted {
    pub reads: Vec<(OutputShape, wgpu::Buffer, u64, Option<u64>)>,
    pub scope: wgpu::ErrorScopeGuard,
}

#[cfg(not(target_arch = "wasm32"))]
fn read_back(
    gpu: &Gpu,
    reads: &[(OutputShape, wgpu::Buffer, u64, Option<u64>)],
) -> Result<Vec<Readback>> {
    for (_, st, bytes, ids) in reads {
        let total = bytes + ids.unwrap_or(0);
        if total > 0 {
            st.slice(..total).map_async(wgpu::MapMode::Read, |_| {});
        }
    }
    gpu.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| BackendError::Unsupported(format!("GPU device lost or stalled: {e}")))?;
    collect_mapped(reads)
}

/// Copies the outputs out of their mapped staging buffers (every one with bytes must be
/// mapped) and unmaps them.
pub(super) fn collect_mapped(
    reads: &[(OutputShape, wgpu::Buffer, u64, Option<u64>)],
) -> Result<Vec<Readback>> {
    let mut out = Vec::with_capacity(reads.len());
    for (shape, st, bytes, ids) in reads {
        let total = bytes + ids.unwrap_or(0);
        let (vals, idv) = if total > 0 {
            let view = st
                .slice(..total)
                .get_mapped_range()
                .map_err(|e| BackendError::Unsupported(format!("cannot read GPU results: {e}")))?;
            let vals: Vec<f32> = bytemuck::cast_slice(&view[..*bytes as usize]).to_vec();
            let idv: Vec<u32> = bytemuck::cast_slice(&view[*bytes as usize..]).to_vec();
            drop(view);
            st.unmap();
            (vals, idv)
        } else {
            (Vec::new(), Vec::new())
        };
        out.push(shape.assemble(vals, idv));
    }
    Ok(out)
}

fn unmapped(layer: usize, seq: u32, pos: u32) -> BackendError {
    BackendError::InvalidStep(format!(
        "layer {layer}: sequence {seq} position {pos} has no KV block (its table does not map it)"
    ))
}
