//! One graph node as kernel launches (the CPU backend, core/src/backend/cpu/, is the oracle
//! each kernel follows).

use cudarc::driver::{CudaSlice, PushKernelArg};
use weft_core::backend::{
    BackendError, Graph, KvDtype, Op, PoolMode, Result, RowIndex, StepBatch, TensorId,
};

use super::{activation_format, cfg, err, product_suffix, CudaBackend, StepInputs};
use crate::launch as grid;

/// What a node's kernels read besides the backend's own state.
pub(super) struct Step<'a> {
    pub graph: &'a Graph,
    pub batch: &'a StepBatch<'a>,
    pub inputs: &'a StepInputs,
    /// Tables carried by ops (`SelectRows` rows, encoder spans), by node: uploaded before the
    /// step, never during a graph capture.
    pub tables: &'a [Option<CudaSlice<u32>>],
    /// Keys per query the attention launches are sized for (crate::graphs::key_bucket).
    pub key_bound: u32,
    pub bufs: &'a [Option<CudaSlice<f32>>],
}

impl Step<'_> {
    fn input(&self, t: TensorId) -> Result<&CudaSlice<f32>> {
        self.bufs
            .get(t.0 as usize)
            .and_then(|b| b.as_ref())
            .ok_or_else(|| BackendError::InvalidStep(format!("tensor {} is not computed", t.0)))
    }

    fn table(&self, node: usize) -> Result<&CudaSlice<u32>> {
        self.tables
            .get(node)
            .and_then(|b| b.as_ref())
            .ok_or_else(|| BackendError::InvalidStep(format!("node {node}: table not uploaded")))
    }
}

const NULL: u64 = 0;

/// Block size for a row-wise kernel over `n` elements: a multiple of 32, at most 256.
fn row_block(n: usize) -> u32 {
    (n.div_ceil(32) * 32).clamp(32, 256) as u32
}

impl CudaBackend {
    /// Runs node `i` into `out` (rows × cols f32); returns it and, for a top-k, its ids (in
    /// `ids` when given).
    pub(super) fn run_node(
        &self,
        st: &Step,
        i: usize,
        out: CudaSlice<f32>,
        ids: Option<CudaSlice<u32>>,
    ) -> Result<(CudaSlice<f32>, Option<CudaSlice<u32>>)> {
        let s = self.stream.clone();
        let node = &st.graph.nodes[i];
        let (rows, cols) = (node.rows, node.cols);
        let n = (rows * cols) as u64;
        let (gx, gy) = grid::elementwise_grid(n, grid::ELEMENTWISE_BLOCK);
        let ew = cfg((gx, gy, 1), grid::ELEMENTWISE_BLOCK, 0);
        let rows32 = rows as u32;
        let cols32 = cols as u32;
        match &node.op {
            Op::Embed { table, scale } => {
                self.embed(st, *table, 0, 0, *scale, &out)?;
            }
            Op::EmbedRows { table, by } => {
                let (mode, fixed) = match by {
                    RowIndex::Positions => (1, 0),
                    RowIndex::Fixed(r) => (2, *r),
                };
                self.embed(st, *table, mode, fixed, 1.0, &out)?;
            }
            Op::MatMul { w, x } => self.product(st.input(*x)?, w, rows, &out)?,
            Op::AddBias { x, b } => {
                let f = self.f("add_bias_f32")?;
                launch!(s, f, ew, st.input(*x)?, self.vector(b)?, &out, &n, &cols32)?;
            }
            Op::RmsNorm { x, w, eps, group } => {
                let f = self.f("rms_norm_f32")?;
                let groups = (n / *group as u64) as u32;
                let g = *group as u32;
                let c = cfg((groups, 1, 1), row_block(*group), 0);
                match w {
                    Some(w) => launch!(s, f, c, st.input(*x)?, self.vector(w)?, &out, &g, eps)?,
                    None => launch!(s, f, c, st.input(*x)?, &NULL, &out, &g, eps)?,
                }
            }
            Op::LayerNorm { x, w, b, eps } => {
                let f = self.f("layer_norm_f32")?;
                let c = cfg((rows32, 1, 1), row_block(cols), 0);
                let wv = w.as_ref().map(|w| self.vector(w)).transpose()?;
                let bv = b.as_ref().map(|b| self.vector(b)).transpose()?;
                let mut lb = s.launch_builder(&f);
                lb.arg(st.input(*x)?);
                match wv {
                    Some(v) => lb.arg(v),
                    None => lb.arg(&NULL),
                };
                match bv {
                    Some(v) => lb.arg(v),
                    None => lb.arg(&NULL),
                };
                lb.arg(&out).arg(&cols32).arg(eps);
                // SAFETY: arguments as layer_norm_f32 declares them; buffers rows × cols.
                unsafe { lb.launch(c) }.map_err(err("kernel launch"))?;
            }
            Op::Rope {
                x,
                head_dim,
                n_rot,
                base,
                neox,
                freq_factors,
            } => {
                let f = self.f("rope_f32")?;
                // The CPU's per-pair angle step, computed with the same f32 powf.
                let step = base.powf(-2.0 / *n_rot as f32);
                let (hd, nr, nx) = (*head_dim as u32, *n_rot as u32, *neox as i32);
                let pairs = (cols / head_dim) * (n_rot / 2);
                let c = cfg((rows32, 1, 1), row_block(pairs.max(cols.min(256))), 0);
                match freq_factors {
                    Some(ff) => launch!(
                        s,
                        f,
                        c,
                        st.input(*x)?,
                        &out,
                        &st.inputs.positions,
                        &cols32,
                        &hd,
                        &nr,
                        &step,
                        &nx,
                        self.vector(ff)?
                    )?,
                    None => launch!(
                        s,
                        f,
                        c,
                        st.input(*x)?,
                        &out,
                        &st.inputs.positions,
                        &cols32,
                        &hd,
                        &nr,
                        &step,
                        &nx,
                        &NULL
                    )?,
                }
            }
            Op::KvStore { kv, layer, k, v } => self.kv_store(st, kv.0, *layer, *k, *v, rows)?,
            Op::Attention {
                q,
                kv,
                layer,
                n_head,
                scale,
                ..
            } => self.attention(st, st.input(*q)?, kv.0, *layer, *n_head, *scale, rows, &out)?,
            Op::Add { a, b } | Op::Mul { a, b } => {
                let name = if matches!(node.op, Op::Add { .. }) {
                    "add_f32"
                } else {
                    "mul_f32"
                };
                let f = self.f(name)?;
                launch!(s, f, ew, st.input(*a)?, st.input(*b)?, &out, &n)?;
            }
            Op::GeGlu { gate, up } => {
                let f = self.f("geglu_f32")?;
                launch!(
                    s,
                    f,
                    ew,
                    st.input(*gate)?,
                    st.input(*up)?,
                    &self.gelu_table,
                    &out,
                    &n
                )?;
            }
            Op::SwiGlu { gate, up } => {
                let f = self.f("swiglu_f32")?;
                launch!(s, f, ew, st.input(*gate)?, st.input(*up)?, &out, &n)?;
            }
            Op::Scale { x, s: k } => {
                let f = self.f("scale_f32")?;
                launch!(s, f, ew, st.input(*x)?, &out, k, &n)?;
            }
            Op::SoftCap { x, cap } => {
                let f = self.f("soft_cap_f32")?;
                launch!(s, f, ew, st.input(*x)?, &out, cap, &n)?;
            }
            Op::Gelu { x } => {
                let f = self.f("gelu_f32")?;
                launch!(s, f, ew, st.input(*x)?, &self.gelu_table, &out, &n)?;
            }
            Op::GeluErf { x } | Op::Silu { x } => {
                let name = if matches!(node.op, Op::Silu { .. }) {
                    "silu_f32"
                } else {
                    "gelu_erf_f32"
                };
                let f = self.f(name)?;
                launch!(s, f, ew, st.input(*x)?, &out, &n)?;
            }
            Op::Softmax { x } => {
                let f = self.f("softmax_f32")?;
                launch!(
                    s,
                    f,
                    cfg((rows32, 1, 1), 256, 0),
                    st.input(*x)?,
                    &out,
                    &cols32
                )?;
            }
            Op::SelectRows { x, .. } => {
                let f = self.f("select_rows_f32")?;
                let ids = st.table(i)?;
                let c = cfg((cols32.div_ceil(256), rows32, 1), 256, 0);
                launch!(s, f, c, st.input(*x)?, ids, &out, &cols32)?;
            }
            Op::TopK { x, k } => {
                let f = self.f("top_k_f32")?;
                let in_cols = st.graph.shape(*x).1 as u32;
                let ids = match ids {
                    Some(b) => b,
                    None => s
                        .alloc_zeros::<u32>((rows * k).max(1))
                        .map_err(err("allocating"))?,
                };
                let k32 = *k as u32;
                launch!(
                    s,
                    f,
                    cfg((rows32, 1, 1), 256, 0),
                    st.input(*x)?,
                    &ids,
                    &out,
                    &in_cols,
                    &k32
                )?;
                return Ok((out, Some(ids)));
            }
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
                if keys.is_some() {
                    return Err(BackendError::Unsupported(
                        "the CUDA backend has no cross-attention (encoder attention over \
                         another row set) yet"
                            .into(),
                    ));
                }
                if *n_head_kv == 0 || !n_head.is_multiple_of(*n_head_kv) {
                    return Err(BackendError::InvalidStep(format!(
                        "{n_head} query heads over {n_head_kv} key/value heads"
                    )));
                }
                let lens: Vec<(u32, u32)> = spans.iter().map(|s| (s.len, s.valid)).collect();
                let (grid3, shared) = grid::encoder_attention(*n_head, &lens, *head_dim)
                    .map_err(BackendError::InvalidStep)?;
                let f = self.f("encoder_attention_f32")?;
                let c = cfg(grid3, grid::ENCODER_THREADS, shared);
                let (nh, nk, hd) = (*n_head as u32, *n_head_kv as u32, *head_dim as u32);
                let (qb, kb, vb) = (st.input(*q)?, st.input(*k)?, st.input(*v)?);
                launch!(
                    s,
                    f,
                    c,
                    qb,
                    kb,
                    vb,
                    &out,
                    st.table(i)?,
                    &nh,
                    &nk,
                    &hd,
                    scale
                )?;
            }
            Op::Input { .. } | Op::AvgPool2d { .. } | Op::RopeMulti { .. } => {
                return Err(BackendError::Unsupported(
                    "the CUDA backend has no vision encoder ops (input rows, 2-D pooling, \
                     multi-component rotary embedding) yet"
                        .into(),
                ));
            }
            Op::AddRow { .. } | Op::MulRow { .. } | Op::SliceCols { .. } => {
                return Err(BackendError::Unsupported(
                    "the CUDA backend has no diffusion-transformer ops (row broadcasts, \
                     column slices) yet"
                        .into(),
                ));
            }
            Op::Pool { x, spans, mode } => {
                let f = self.f("pool_rows_f32")?;
                let m: i32 = match mode {
                    PoolMode::Mean => 0,
                    PoolMode::First => 1,
                    PoolMode::Last => 2,
                };
                let c = cfg(grid::pool_grid(cols, spans.len(), 256), 256, 0);
                launch!(s, f, c, st.input(*x)?, &out, st.table(i)?, &cols32, &m)?;
            }
        }
        Ok((out, None))
    }

    fn embed(
        &self,
        st: &Step,
        table: weft_core::backend::Weight,
        mode: i32,
        fixed: u32,
        scale: f32,
        out: &CudaSlice<f32>,
    ) -> Result<()> {
        let (data, ty) = (&self.weight(&table)?.data, self.weight(&table)?.ty);
        if mode == 0 && st.batch.tokens.iter().any(|&t| t as usize >= table.rows) {
            return Err(BackendError::InvalidStep(
                "a token id is outside the vocabulary".into(),
            ));
        }
        let f = self.f("embed_rows")?;
        let ty = ty as i32;
        let (cols, nrows) = (table.cols as u32, table.rows as u32);
        let c = cfg((st.graph.n_tokens as u32, 1, 1), row_block(table.cols), 0);
        let s = &self.stream;
        launch!(
            s,
            f,
            c,
            data,
            &ty,
            &cols,
            &nrows,
            &st.inputs.tokens,
            &st.inputs.positions,
            &mode,
            &fixed,
            &scale,
            out
        )
    }

    /// `out = x · wᵀ` for `tokens` rows of x: activations quantized to the weight type's
    /// vec-dot type first (as the CPU), then the decode or batched product kernel.
    fn product(
        &self,
        x: &CudaSlice<f32>,
        w: &weft_core::backend::Weight,
        tokens: usize,
        out: &CudaSlice<f32>,
    ) -> Result<()> {
        let dw = self.weight(w)?;
        let suffix = product_suffix(dw.ty).ok_or_else(|| {
            BackendError::Unsupported(format!("CUDA: no product for {:?}", dw.ty))
        })?;
        if !w.cols.is_multiple_of(32) {
            return Err(BackendError::Unsupported(format!(
                "CUDA: products need rows of whole 32-element units, not {}",
                w.cols
            )));
        }
        let s = &self.stream;
        let (rows, cols, t) = (w.rows as u32, w.cols as u32, tokens as u32);
        let quantized = match activation_format(dw.ty) {
            Some((qname, block, bytes)) => {
                let nb = w.cols / block;
                let q = s
                    .alloc_zeros::<u8>((tokens * nb * bytes).max(1))
                    .map_err(err("allocating"))?;
                let f = self.f(qname)?;
                let c = cfg(((nb as u32).div_ceil(4), t, 1), 128, 0);
                launch!(s, f, c, x, &q, &cols)?;
                Some(q)
            }
            None => None,
        };
        let (gx, gy) = grid::gemm_grid(w.rows, tokens);
        match (grid::product_form(tokens, quantized.is_some()), &quantized) {
            (grid::ProductForm::Tiled, Some(q)) => {
                let f = self.f(&format!("matmul_tiled_{suffix}"))?;
                let (tx, ty) = grid::tiled_grid(w.rows, tokens);
                let c = cfg((tx, ty, 1), grid::TILE_THREADS, 0);
                launch!(s, f, c, &dw.data, q, out, &rows, &cols, &t)
            }
            (grid::ProductForm::Matvec, _) => {
                let f = self.f(&format!("matvec_{suffix}"))?;
                let c = cfg((gx, t, 1), 128, 0);
                match &quantized {
                    Some(q) => launch!(s, f, c, &dw.data, q, out, &rows, &cols),
                    None => launch!(s, f, c, &dw.data, x, out, &rows, &cols),
                }
            }
            _ => {
                let f = self.f(&format!("matmul_{suffix}"))?;
                let c = cfg((gx, gy, 1), 128, 0);
                match &quantized {
                    Some(q) => launch!(s, f, c, &dw.data, q, out, &rows, &cols, &t),
                    None => launch!(s, f, c, &dw.data, x, out, &rows, &cols, &t),
                }
            }
        }
    }

    fn kv_store(
        &self,
        st: &Step,
        kv: u32,
        layer: usize,
        k: TensorId,
        v: TensorId,
        rows: usize,
    ) -> Result<()> {
        let (cache, l) = self.cache(kv, layer)?;
        let spec = &cache.spec.layers[layer];
        self.check_kv_rows(st.batch, kv, layer)?;
        let f = self.f("kv_store")?;
        let per_seq = cache.tables.per_seq() as u32;
        let paged = spec.window.is_none() as i32;
        let wk = (spec.n_kv_head * spec.head_dim_k) as u32;
        let wv = (spec.n_kv_head * spec.head_dim_v) as u32;
        let cap = spec.capacity as u32;
        let f16 = (cache.spec.dtype == KvDtype::F16) as i32;
        let c = cfg((rows as u32, 1, 1), row_block(wk.max(wv) as usize), 0);
        let s = &self.stream;
        launch!(
            s,
            f,
            c,
            st.input(k)?,
            st.input(v)?,
            &l.k,
            &l.v,
            &st.inputs.positions,
            &st.inputs.seqs,
            &cache.tables_dev,
            &per_seq,
            &wk,
            &wv,
            &cap,
            &paged,
            &f16
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        st: &Step,
        q: &CudaSlice<f32>,
        kv: u32,
        layer: usize,
        n_head: usize,
        scale: f32,
        rows: usize,
        out: &CudaSlice<f32>,
    ) -> Result<()> {
        let (cache, l) = self.cache(kv, layer)?;
        let spec = &cache.spec.layers[layer];
        let (hk, hv, n_kv) = (spec.head_dim_k, spec.head_dim_v, spec.n_kv_head);
        if n_kv == 0 || !n_head.is_multiple_of(n_kv) || hv > 4 * ATT_THREADS as usize {
            return Err(BackendError::InvalidStep(format!(
                "layer {layer}: {n_head} query heads over {n_kv} key/value heads of {hv} do not fit the CUDA attention kernel"
            )));
        }
        // Sized for the step's key bound, not its exact key count, so that a captured graph
        // serves later positions and launches with and without graphs split alike.
        let max_keys = self.check_attended(st.batch, kv, layer)?.max(
            st.key_bound
                .min(spec.window.unwrap_or(spec.capacity).min(spec.capacity) as u32),
        );
        let per_seq = cache.tables.per_seq() as u32;
        let (splits, chunk) =
            grid::split_k(max_keys, (n_head * rows) as u32, self.device.sm_count, 64);
        let s = &self.stream;
        let part = s
            .alloc_zeros::<f32>(if splits > 1 {
                rows * n_head * splits as usize * (2 + hv)
            } else {
                1
            })
            .map_err(err("allocating"))?;
        let f = self.f("attention_f32")?;
        let shared = ((hk + ATT_THREADS as usize) * 4) as u32;
        let c = cfg((n_head as u32, rows as u32, splits), ATT_THREADS, shared);
        let (nh, nk, hk32, hv32) = (n_head as u32, n_kv as u32, hk as u32, hv as u32);
        let cap = spec.capacity as u32;
        let window = spec.window.unwrap_or(0) as u32;
        let f16 = (cache.spec.dtype == KvDtype::F16) as i32;
        launch!(
            s,
            f,
            c,
            q,
            &l.k,
            &l.v,
            out,
            &part,
            &st.inputs.positions,
            &st.inputs.seqs,
            &cache.tables_dev,
            &per_seq,
            &nh,
            &nk,
            &hk32,
            &hv32,
            &cap,
            &window,
            &scale,
            &f16,
            &chunk
        )?;
        if splits > 1 {
            let f = self.f("attention_combine")?;
            let c = cfg((nh, rows as u32, 1), row_block(hv), 0);
            launch!(s, f, c, &part, out, &nh, &hv32, &splits)?;
        }
        Ok(())
    }
}

pub(super) fn unmapped(layer: usize, seq: u32, pos: u32) -> BackendError {
    BackendError::InvalidStep(format!(
        "layer {layer}: sequence {seq} position {pos} has no KV block (its table does not map it)"
    ))
}

/// Threads per attention block (keys per tile).
const ATT_THREADS: u32 = 128;
