//! A recorded forward step: a list of ops on 2-D activation tensors.
//!
//! Every activation is a row-major `rows × cols` f32 matrix, one row per token of the step (or
//! per selected output row). Per-head ops (QK-norm, RoPE, attention) see a row as `cols / head_dim`
//! heads laid out one after the other. Nodes are appended in execution order, so a backend can
//! run them front to back (CPU) or encode them all into one submission (GPU).

use std::sync::Arc;

use super::{KvCacheId, Weight};

/// A handle on an activation tensor of a [`Graph`] (the index of the node that produces it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorId(pub u32);

/// Which table row each step row takes in [`Op::EmbedRows`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowIndex {
    /// The row at the step row's position (learned absolute position embeddings).
    Positions,
    /// The same row for every step row (e.g. token type 0).
    Fixed(u32),
}

/// One sequence of an encoder step: `len` consecutive step rows from `start`, of which the
/// first `valid` are real tokens (the rest padding, never attended to nor pooled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqSpan {
    pub start: u32,
    pub len: u32,
    pub valid: u32,
}

/// How [`Op::Pool`] reduces a sequence's rows to one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolMode {
    /// The mean of the valid rows.
    Mean,
    /// The first row (BERT's `[CLS]`).
    First,
    /// The last valid row.
    Last,
}

/// How [`Op::RopeMulti`] forms its frequencies and pairs (see there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MultiRope {
    /// Qwen2-VL's M-RoPE of text rows (llama.cpp's `GGML_ROPE_TYPE_MROPE`).
    Text,
    /// Qwen2-VL's vision tower (`GGML_ROPE_TYPE_VISION`).
    Vision,
    /// Wan's 3-D rotary embedding of video patches.
    Video,
}

/// One operation. Shapes are checked when the node is added.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Rows of an embedding table (possibly quantized) for the step's token ids, times `scale`.
    Embed {
        table: Weight,
        scale: f32,
    },
    /// `x · wᵀ`: for each row of `x`, the dot product with every row of `w`.
    MatMul {
        w: Weight,
        x: TensorId,
    },
    /// `x + b` with `b` an f32 vector broadcast over rows.
    AddBias {
        x: TensorId,
        b: Weight,
    },
    /// RMS normalisation over groups of `group` elements, then times `w` (length `group`) if given.
    RmsNorm {
        x: TensorId,
        w: Option<Weight>,
        eps: f32,
        group: usize,
    },
    /// Layer normalisation over whole rows, then `* w + b` if given.
    LayerNorm {
        x: TensorId,
        w: Option<Weight>,
        b: Option<Weight>,
        eps: f32,
    },
    /// Rotary position embedding of each head, using the step's positions.
    Rope {
        x: TensorId,
        head_dim: usize,
        /// Leading elements of each head that rotate.
        n_rot: usize,
        base: f32,
        /// NeoX layout rotates `(i, i + n_rot/2)` pairs; the normal layout `(2i, 2i+1)`.
        neox: bool,
        /// Optional per-frequency divisors (Llama 3 `rope_freqs`).
        freq_factors: Option<Weight>,
    },
    /// Writes each row's key and value into the cache at its sequence and position.
    /// Produces an empty tensor that attention depends on.
    KvStore {
        kv: KvCacheId,
        layer: usize,
        k: TensorId,
        v: TensorId,
    },
    /// Causal attention of each query row over its sequence's cached keys, up to its own
    /// position (and no further back than the layer's window). Query heads share key/value heads
    /// in groups (GQA). Output: `rows × n_head·head_dim_v`.
    Attention {
        q: TensorId,
        /// The [`Op::KvStore`] node this attention reads after.
        stored: TensorId,
        kv: KvCacheId,
        layer: usize,
        n_head: usize,
        scale: f32,
    },
    Add {
        a: TensorId,
        b: TensorId,
    },
    Mul {
        a: TensorId,
        b: TensorId,
    },
    Scale {
        x: TensorId,
        s: f32,
    },
    /// `cap · tanh(x / cap)`.
    SoftCap {
        x: TensorId,
        cap: f32,
    },
    /// GELU, tanh approximation.
    Gelu {
        x: TensorId,
    },
    Silu {
        x: TensorId,
    },
    /// `gelu(gate) * up`.
    GeGlu {
        gate: TensorId,
        up: TensorId,
    },
    /// `silu(gate) * up`.
    SwiGlu {
        gate: TensorId,
        up: TensorId,
    },
    /// Row-wise softmax.
    Softmax {
        x: TensorId,
    },
    /// Keeps only the listed rows, in that order.
    SelectRows {
        x: TensorId,
        rows: Vec<u32>,
    },
    /// The `k` largest entries of each row (ids and values), best first.
    TopK {
        x: TensorId,
        k: usize,
    },
    /// Rows of a table (possibly quantized) picked per step row by [`RowIndex`].
    EmbedRows {
        table: Weight,
        by: RowIndex,
    },
    /// GELU with the error function (BERT's `gelu`), not the tanh approximation.
    GeluErf {
        x: TensorId,
    },
    /// Bidirectional attention of an encoder: each row of a span attends to the span's valid
    /// rows of `k`/`v` (this step's own rows; no cache). Query heads share key/value heads in
    /// groups. Output: `rows × n_head·head_dim`.
    ///
    /// With `keys` (cross-attention, e.g. a DiT's video rows over its text rows), `k`/`v` are
    /// another row set: the rows of span `i` attend to the `valid` first rows of `keys[i]`
    /// in `k`/`v` instead of their own span's.
    EncoderAttention {
        q: TensorId,
        k: TensorId,
        v: TensorId,
        n_head: usize,
        n_head_kv: usize,
        head_dim: usize,
        scale: f32,
        spans: Vec<SeqSpan>,
        keys: Option<Vec<SeqSpan>>,
    },
    /// One row per span: its valid rows reduced by `mode`.
    Pool {
        x: TensorId,
        spans: Vec<SeqSpan>,
        mode: PoolMode,
    },
    /// f32 rows given by the caller (e.g. an image's unfolded patches), row-major, as the
    /// node's shape says.
    Input {
        data: Arc<[f32]>,
    },
    /// Average pooling of a grid of rows: `x` holds `height × width` rows (the grid row by row,
    /// one channel vector per row); each output row is the mean of a `k × k` block of rows, the
    /// blocks taken row by row (stride `k`, no padding; `k` divides both sides).
    AvgPool2d {
        x: TensorId,
        width: usize,
        height: usize,
        k: usize,
    },
    /// Rotary embedding with several position components per row (Qwen2-VL's M-RoPE and its
    /// vision tower's 2-D RoPE), NeoX pairs `(i, i + n_rot/2)` over the leading `n_rot`
    /// elements of each head. Pair `i` belongs to section `s` of `sections` (counted in pairs,
    /// cycling over their sum) and turns by `positions[row][s]` times a frequency:
    /// - text ([`MultiRope::Text`]): `base^(-2i/n_rot)`, as llama.cpp's `GGML_ROPE_TYPE_MROPE`;
    /// - vision ([`MultiRope::Vision`]): the exponent restarts in each section,
    ///   `base^(-2(i - start)/(n_rot/2))`, as `GGML_ROPE_TYPE_VISION` (n_rot = head size).
    ///
    /// A text row whose components are all equal turns exactly as [`Op::Rope`] with NeoX.
    ///
    /// - video ([`MultiRope::Video`], Wan's DiT): pairs `(2i, 2i+1)` (not NeoX); each section
    ///   (`[frame, row, column, 0]` pairs, no cycling) restarts the exponent and divides by its
    ///   own width, `base^(-2(i - start)/(2·sections[s]))`; angles and their cos / sin are
    ///   formed in f64 and rounded to f32 (as diffusers' `WanRotaryPosEmbed`).
    RopeMulti {
        x: TensorId,
        head_dim: usize,
        n_rot: usize,
        base: f32,
        sections: [u32; 4],
        kind: MultiRope,
        /// One `[t, h, w, e]` per row.
        positions: Arc<[[u32; 4]]>,
    },
    /// `x` with one row `row` (a `1 × cols` tensor) added to every row (a diffusion
    /// transformer's modulation shift, computed in the graph from the timestep).
    AddRow {
        x: TensorId,
        row: TensorId,
    },
    /// `x` with every row multiplied element-wise by one row `row` (`1 × cols`): adaLN's
    /// `1 + scale` and the gates of a diffusion transformer.
    MulRow {
        x: TensorId,
        row: TensorId,
    },
    /// Columns `start..start + node cols` of every row of `x` (one of the modulation vectors
    /// a timestep projection makes side by side).
    SliceCols {
        x: TensorId,
        start: usize,
    },
}

impl Op {
    /// The tensors this op reads.
    pub fn inputs(&self) -> Vec<TensorId> {
        use Op::*;
        match self {
            Embed { .. } | EmbedRows { .. } => vec![],
            MatMul { x, .. }
            | AddBias { x, .. }
            | RmsNorm { x, .. }
            | LayerNorm { x, .. }
            | Rope { x, .. }
            | Scale { x, .. }
            | SoftCap { x, .. }
            | Gelu { x }
            | Silu { x }
            | Softmax { x }
            | SelectRows { x, .. }
            | TopK { x, .. }
            | GeluErf { x }
            | Pool { x, .. }
            | AvgPool2d { x, .. }
            | RopeMulti { x, .. }
            | SliceCols { x, .. } => vec![*x],
            AddRow { x, row } | MulRow { x, row } => vec![*x, *row],
            Input { .. } => vec![],
            KvStore { k, v, .. } => vec![*k, *v],
            EncoderAttention { q, k, v, .. } => vec![*q, *k, *v],
            Attention { q, stored, .. } => vec![*q, *stored],
            Add { a, b } | Mul { a, b } => vec![*a, *b],
            GeGlu { gate, up } | SwiGlu { gate, up } => vec![*gate, *up],
        }
    }
}

/// A node: an op and the shape of what it produces.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub op: Op,
    pub rows: usize,
    pub cols: usize,
}

/// A recorded step.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Rows of the step batch (tokens).
    pub n_tokens: usize,
    pub nodes: Vec<Node>,
    /// Nodes read back by [`super::Backend::execute`], in this order.
    pub outputs: Vec<TensorId>,
    /// Rows whose input is a given embedding instead of a token's (an image's rows in a
    /// prompt); [`Graph::embed`] puts them in place of the looked-up rows.
    pub row_embeddings: Option<RowEmbeddings>,
    /// Rotary positions `[t, h, w, e]` of each row, for models with multimodal rotary
    /// positions (Qwen2-VL's M-RoPE): an image's rows take grid positions. `None`: every
    /// component is the row's step position.
    pub rope_positions: Option<Arc<[[u32; 4]]>>,
    /// Row ranges `start..end` (one sequence, consecutive positions) whose rows attend to each
    /// other both ways: each row sees the cache up to the range's last position (Gemma 3
    /// decodes an image's tokens so). Every other row is causal.
    pub bidirectional: Vec<(u32, u32)>,
}

/// Embedding rows that take the place of token embeddings in some rows of a step.
#[derive(Clone, Debug, PartialEq)]
pub struct RowEmbeddings {
    /// The step rows they replace, in order.
    pub rows: Vec<u32>,
    /// `rows.len() × width` values, row-major.
    pub data: Arc<[f32]>,
}

impl Graph {
    /// An empty graph for a step of `n_tokens` rows.
    pub fn new(n_tokens: usize) -> Self {
        Graph {
            n_tokens,
            nodes: Vec::new(),
            outputs: Vec::new(),
            row_embeddings: None,
            rope_positions: None,
            bidirectional: Vec::new(),
        }
    }

    /// Per row, the last cached position it attends to: its own position, or for a row of a
    /// [`bidirectional`](Self::bidirectional) range, the range's last position.
    pub fn attend_ends(&self, positions: &[u32]) -> Vec<u32> {
        let mut ends = positions.to_vec();
        for &(a, b) in &self.bidirectional {
            let (a, b) = (a as usize, (b as usize).min(ends.len()));
            if a < b {
                let last = positions[b - 1];
                ends[a..b].iter_mut().for_each(|e| *e = last);
            }
        }
        ends
    }

    /// The shape of a tensor.
    pub fn shape(&self, t: TensorId) -> (usize, usize) {
        let n = &self.nodes[t.0 as usize];
        (n.rows, n.cols)
    }

    fn push(&mut self, op: Op, rows: usize, cols: usize) -> TensorId {
        self.nodes.push(Node { op, rows, cols });
        TensorId(self.nodes.len() as u32 - 1)
    }

    fn same_shape(&self, a: TensorId, b: TensorId, what: &str) -> (usize, usize) {
        let (sa, sb) = (self.shape(a), self.shape(b));
        assert_eq!(sa, sb, "{what}: operand shapes differ");
        sa
    }

    /// Marks a tensor to be read back after execution.
    pub fn output(&mut self, t: TensorId) {
        self.outputs.push(t);
    }

    /// Token embeddings times `scale`; rows given in [`row_embeddings`](Self::row_embeddings)
    /// take those values instead, unscaled (llama.cpp scales only token rows: an image's
    /// embeddings enter as the projector made them).
    pub fn embed(&mut self, table: Weight, scale: f32) -> TensorId {
        let x = self.push(Op::Embed { table, scale }, self.n_tokens, table.cols);
        let Some(given) = self.row_embeddings.clone() else {
            return x;
        };
        let (n, d) = (self.n_tokens, table.cols);
        assert_eq!(
            given.data.len(),
            given.rows.len() * d,
            "embed: given rows' width"
        );
        // x · keep + given, with keep 0 on given rows and 1 elsewhere: exact for both kinds.
        let mut keep = vec![1.0f32; n * d];
        let mut put = vec![0.0f32; n * d];
        for (i, &r) in given.rows.iter().enumerate() {
            let r = r as usize;
            keep[r * d..(r + 1) * d].fill(0.0);
            put[r * d..(r + 1) * d].copy_from_slice(&given.data[i * d..(i + 1) * d]);
        }
        let keep = self.input(keep.into(), n, d);
        let put = self.input(put.into(), n, d);
        let x = self.mul(x, keep);
        self.add(x, put)
    }

    pub fn matmul(&mut self, w: Weight, x: TensorId) -> TensorId {
        let (rows, cols) = self.shape(x);
        assert_eq!(
            cols, w.cols,
            "matmul: activation width differs from weight rows"
        );
        self.push(Op::MatMul { w, x }, rows, w.rows)
    }

    pub fn add_bias(&mut self, x: TensorId, b: Weight) -> TensorId {
        let (rows, cols) = self.shape(x);
        assert_eq!(cols, b.cols * b.rows, "add_bias: bias length");
        self.push(Op::AddBias { x, b }, rows, cols)
    }

    pub fn rms_norm(&mut self, x: TensorId, w: Option<Weight>, eps: f32, group: usize) -> TensorId {
        let (rows, cols) = self.shape(x);
        assert_eq!(cols % group, 0, "rms_norm: group does not divide the row");
        if let Some(w) = w {
            assert_eq!(w.cols * w.rows, group, "rms_norm: weight length");
        }
        self.push(Op::RmsNorm { x, w, eps, group }, rows, cols)
    }

    pub fn layer_norm(
        &mut self,
        x: TensorId,
        w: Option<Weight>,
        b: Option<Weight>,
        eps: f32,
    ) -> TensorId {
        let (rows, cols) = self.shape(x);
        self.push(Op::LayerNorm { x, w, b, eps }, rows, cols)
    }

    pub fn rope(
        &mut self,
        x: TensorId,
        head_dim: usize,
        n_rot: usize,
        base: f32,
        neox: bool,
        freq_factors: Option<Weight>,
    ) -> TensorId {
        let (rows, cols) = self.shape(x);
        assert!(
            cols.is_multiple_of(head_dim) && n_rot <= head_dim && n_rot.is_multiple_of(2),
            "rope shape"
        );
        let op = Op::Rope {
            x,
            head_dim,
            n_rot,
            base,
            neox,
            freq_factors,
        };
        self.push(op, rows, cols)
    }

    pub fn kv_store(&mut self, kv: KvCacheId, layer: usize, k: TensorId, v: TensorId) -> TensorId {
        let (rows, _) = self.shape(k);
        assert_eq!(rows, self.shape(v).0, "kv_store: k and v rows differ");
        self.push(Op::KvStore { kv, layer, k, v }, rows, 0)
    }

    /// Attention; `head_dim_v` gives the output width per head.
    #[allow(clippy::too_many_arguments)]
    pub fn attention(
        &mut self,
        q: TensorId,
        stored: TensorId,
        kv: KvCacheId,
        layer: usize,
        n_head: usize,
        head_dim_v: usize,
        scale: f32,
    ) -> TensorId {
        let (rows, _) = self.shape(q);
        let op = Op::Attention {
            q,
            stored,
            kv,
            layer,
            n_head,
            scale,
        };
        self.push(op, rows, n_head * head_dim_v)
    }

    pub fn add(&mut self, a: TensorId, b: TensorId) -> TensorId {
        let (r, c) = self.same_shape(a, b, "add");
        self.push(Op::Add { a, b }, r, c)
    }

    pub fn mul(&mut self, a: TensorId, b: TensorId) -> TensorId {
        let (r, c) = self.same_shape(a, b, "mul");
        self.push(Op::Mul { a, b }, r, c)
    }

    pub fn scale(&mut self, x: TensorId, s: f32) -> TensorId {
        let (r, c) = self.shape(x);
        self.push(Op::Scale { x, s }, r, c)
    }

    pub fn soft_cap(&mut self, x: TensorId, cap: f32) -> TensorId {
        let (r, c) = self.shape(x);
        self.push(Op::SoftCap { x, cap }, r, c)
    }

    pub fn gelu(&mut self, x: TensorId) -> TensorId {
        let (r, c) = self.shape(x);
        self.push(Op::Gelu { x }, r, c)
    }

    pub fn silu(&mut self, x: TensorId) -> TensorId {
        let (r, c) = self.shape(x);
        self.push(Op::Silu { x }, r, c)
    }

    pub fn geglu(&mut self, gate: TensorId, up: TensorId) -> TensorId {
        let (r, c) = self.same_shape(gate, up, "geglu");
        self.push(Op::GeGlu { gate, up }, r, c)
    }

    pub fn swiglu(&mut self, gate: TensorId, up: TensorId) -> TensorId {
        let (r, c) = self.same_shape(gate, up, "swiglu");
        self.push(Op::SwiGlu { gate, up }, r, c)
    }

    pub fn softmax(&mut self, x: TensorId) -> TensorId {
        let (r, c) = self.shape(x);
        self.push(Op::Softmax { x }, r, c)
    }

    pub fn select_rows(&mut self, x: TensorId, rows: Vec<u32>) -> TensorId {
        let (r, c) = self.shape(x);
        assert!(
            rows.iter().all(|&i| (i as usize) < r),
            "select_rows: row out of range"
        );
        let n = rows.len();
        self.push(Op::SelectRows { x, rows }, n, c)
    }

    pub fn top_k(&mut self, x: TensorId, k: usize) -> TensorId {
        let (r, c) = self.shape(x);
        let k = k.min(c);
        self.push(Op::TopK { x, k }, r, k)
    }

    pub fn embed_rows(&mut self, table: Weight, by: RowIndex) -> TensorId {
        if let RowIndex::Fixed(r) = by {
            assert!((r as usize) < table.rows, "embed_rows: row out of range");
        }
        self.push(Op::EmbedRows { table, by }, self.n_tokens, table.cols)
    }

    pub fn gelu_erf(&mut self, x: TensorId) -> TensorId {
        let (r, c) = self.shape(x);
        self.push(Op::GeluErf { x }, r, c)
    }

    /// Encoder attention over `spans`, which must cover the step's rows in order without
    /// overlapping (checked).
    #[allow(clippy::too_many_arguments)]
    pub fn encoder_attention(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        n_head: usize,
        n_head_kv: usize,
        head_dim: usize,
        scale: f32,
        spans: Vec<SeqSpan>,
    ) -> TensorId {
        let (rows, qc) = self.shape(q);
        assert_eq!(qc, n_head * head_dim, "encoder_attention: query width");
        assert_eq!(
            self.shape(k),
            (rows, n_head_kv * head_dim),
            "encoder_attention: keys"
        );
        assert_eq!(
            self.shape(v),
            (rows, n_head_kv * head_dim),
            "encoder_attention: values"
        );
        assert!(
            n_head_kv > 0 && n_head.is_multiple_of(n_head_kv),
            "encoder_attention: head groups"
        );
        check_spans(&spans, rows);
        let op = Op::EncoderAttention {
            q,
            k,
            v,
            n_head,
            n_head_kv,
            head_dim,
            scale,
            spans,
            keys: None,
        };
        self.push(op, rows, n_head * head_dim)
    }

    /// Cross-attention ([`Op::EncoderAttention`] with `keys`): the rows of `spans[i]` of `q`
    /// attend to the valid rows of `keys[i]` of `k`/`v`, another row set. Both span lists are
    /// checked as [`encoder_attention`](Self::encoder_attention)'s, against their tensors.
    #[allow(clippy::too_many_arguments)]
    pub fn cross_attention(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        n_head: usize,
        n_head_kv: usize,
        head_dim: usize,
        scale: f32,
        spans: Vec<SeqSpan>,
        keys: Vec<SeqSpan>,
    ) -> TensorId {
        let (rows, qc) = self.shape(q);
        let kv_rows = self.shape(k).0;
        assert_eq!(qc, n_head * head_dim, "cross_attention: query width");
        for t in [k, v] {
            assert_eq!(
                self.shape(t),
                (kv_rows, n_head_kv * head_dim),
                "cross_attention: keys and values"
            );
        }
        assert!(
            n_head_kv > 0 && n_head.is_multiple_of(n_head_kv),
            "cross_attention: head groups"
        );
        assert_eq!(
            spans.len(),
            keys.len(),
            "cross_attention: one key span per span"
        );
        check_spans(&spans, rows);
        check_spans(&keys, kv_rows);
        let op = Op::EncoderAttention {
            q,
            k,
            v,
            n_head,
            n_head_kv,
            head_dim,
            scale,
            spans,
            keys: Some(keys),
        };
        self.push(op, rows, n_head * head_dim)
    }

    /// One row per span of `x` (see [`PoolMode`]).
    pub fn pool(&mut self, x: TensorId, spans: Vec<SeqSpan>, mode: PoolMode) -> TensorId {
        let (rows, cols) = self.shape(x);
        check_spans(&spans, rows);
        let n = spans.len();
        self.push(Op::Pool { x, spans, mode }, n, cols)
    }

    /// A `rows × cols` tensor holding `data` (checked to have that many values).
    pub fn input(&mut self, data: Arc<[f32]>, rows: usize, cols: usize) -> TensorId {
        assert_eq!(data.len(), rows * cols, "input: data length");
        self.push(Op::Input { data }, rows, cols)
    }

    /// `k × k` average pooling of `x` seen as a `height × width` grid of rows.
    pub fn avg_pool_2d(&mut self, x: TensorId, width: usize, height: usize, k: usize) -> TensorId {
        let (rows, cols) = self.shape(x);
        assert_eq!(
            rows,
            width * height,
            "avg_pool_2d: rows differ from the grid"
        );
        assert!(
            k > 0 && width.is_multiple_of(k) && height.is_multiple_of(k),
            "avg_pool_2d: the kernel must divide the grid"
        );
        let op = Op::AvgPool2d {
            x,
            width,
            height,
            k,
        };
        self.push(op, (width / k) * (height / k), cols)
    }

    /// Multi-component rotary embedding ([`Op::RopeMulti`]), one position vector per row.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_multi(
        &mut self,
        x: TensorId,
        head_dim: usize,
        n_rot: usize,
        base: f32,
        sections: [u32; 4],
        kind: MultiRope,
        positions: Arc<[[u32; 4]]>,
    ) -> TensorId {
        let (rows, cols) = self.shape(x);
        assert!(
            cols.is_multiple_of(head_dim) && n_rot <= head_dim && n_rot.is_multiple_of(2),
            "rope_multi shape"
        );
        assert_eq!(positions.len(), rows, "rope_multi: one position per row");
        assert!(
            sections.iter().any(|&s| s > 0),
            "rope_multi: every section is empty"
        );
        if kind == MultiRope::Video {
            assert_eq!(
                sections.iter().sum::<u32>() as usize * 2,
                n_rot,
                "rope_multi: video sections must cover the rotated pairs"
            );
        }
        let op = Op::RopeMulti {
            x,
            head_dim,
            n_rot,
            base,
            sections,
            kind,
            positions,
        };
        self.push(op, rows, cols)
    }

    /// `x` plus the one row `row` on every row ([`Op::AddRow`]).
    pub fn add_row(&mut self, x: TensorId, row: TensorId) -> TensorId {
        let (r, c) = self.shape(x);
        assert_eq!(self.shape(row), (1, c), "add_row: the row's shape");
        self.push(Op::AddRow { x, row }, r, c)
    }

    /// `x` times the one row `row` on every row ([`Op::MulRow`]).
    pub fn mul_row(&mut self, x: TensorId, row: TensorId) -> TensorId {
        let (r, c) = self.shape(x);
        assert_eq!(self.shape(row), (1, c), "mul_row: the row's shape");
        self.push(Op::MulRow { x, row }, r, c)
    }

    /// Columns `start..start + len` of every row of `x` ([`Op::SliceCols`]).
    pub fn slice_cols(&mut self, x: TensorId, start: usize, len: usize) -> TensorId {
        let (r, c) = self.shape(x);
        assert!(
            len > 0 && start + len <= c,
            "slice_cols: columns out of range"
        );
        self.push(Op::SliceCols { x, start }, r, len)
    }
}

/// Spans lie in order inside `rows`, each with at least one valid row.
fn check_spans(spans: &[SeqSpan], rows: usize) {
    let mut end = 0u64;
    for s in spans {
        assert!(
            s.start as u64 >= end && s.valid >= 1 && s.valid <= s.len,
            "spans: out of order or empty"
        );
        end = s.start as u64 + s.len as u64;
    }
    assert!(end <= rows as u64, "spans: past the last row");
}
