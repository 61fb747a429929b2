//! BERT-style encoders (BERT, MiniLM, BGE, E5, GTE and the other sentence-transformers models
//! of that shape), in llama.cpp's GGUF layout (`general.architecture = bert`).
//!
//! `x = LayerNorm(tok[id] + pos[p] + type[0])`; per block, post-LayerNorm:
//! `h = LN(x + Wo·attn(Wq·x + bq, Wk·x + bk, Wv·x + bv) + bo)` with bidirectional attention
//! within each sequence, then `x' = LN(h + Wdown·gelu_erf(Wup·h + bup) + bdown)`. The hidden
//! states of each sequence are pooled into one vector (mean, CLS or last token).

use super::common::{Loader, ModelInfo};
use super::ModelError;
use crate::backend::{Graph, PoolMode, RowIndex, SeqSpan, TensorId, Weight};

/// llama.cpp's `<arch>.pooling_type` numbers.
pub fn pool_mode_from_gguf(v: u64) -> Option<PoolMode> {
    match v {
        1 => Some(PoolMode::Mean),
        2 => Some(PoolMode::First),
        3 => Some(PoolMode::Last),
        _ => None,
    }
}

/// The number llama.cpp's `<arch>.pooling_type` gives a pooling mode.
pub fn pool_mode_to_gguf(m: PoolMode) -> u32 {
    match m {
        PoolMode::Mean => 1,
        PoolMode::First => 2,
        PoolMode::Last => 3,
    }
}

#[derive(Clone, Copy)]
struct Norm {
    w: Weight,
    b: Weight,
}

struct Block {
    wq: Weight,
    bq: Weight,
    wk: Weight,
    bk: Weight,
    wv: Weight,
    bv: Weight,
    wo: Weight,
    bo: Weight,
    attn_norm: Norm,
    up: Weight,
    bup: Weight,
    down: Weight,
    bdown: Weight,
    out_norm: Norm,
}

/// A loaded encoder.
pub struct Bert {
    info: ModelInfo,
    n_head: usize,
    head_dim: usize,
    eps: f32,
    /// The pooling the file asks for (`bert.pooling_type`), if any.
    pub pooling: Option<PoolMode>,
    tok_embd: Weight,
    pos_embd: Weight,
    token_types: Option<Weight>,
    embd_norm: Norm,
    blocks: Vec<Block>,
}

impl Bert {
    /// Reads hyper-parameters and weights.
    pub fn load(l: &mut Loader) -> Result<Self, ModelError> {
        let n_embd = l.usize("embedding_length")?;
        let n_layer = l.usize("block_count")?;
        let (n_head, n_head_kv) = l.head_counts()?;
        l.check(
            n_head_kv == n_head && n_embd.is_multiple_of(n_head),
            "attention.head_count",
            "must divide embedding_length (and equal head_count_kv)",
        )?;
        let eps = l.f32_opt("attention.layer_norm_epsilon")?.unwrap_or(1e-12);
        let n_ctx_train = l.usize_or("context_length", 512)?;
        let pooling = match l.usize_or("pooling_type", 0)? as u64 {
            0 => None,
            v => Some(pool_mode_from_gguf(v).ok_or_else(|| ModelError::Metadata {
                key: "bert.pooling_type".into(),
                message: format!("pooling type {v} is not supported (1 mean, 2 cls, 3 last)"),
            })?),
        };
        if let Some(causal) = l.file.gguf.get_bool("bert.attention.causal") {
            l.check(!causal, "attention.causal", "a BERT encoder is not causal")?;
        }
        let norm = |l: &mut Loader, name: &str| -> Result<Norm, ModelError> {
            Ok(Norm {
                w: l.weight(&format!("{name}.weight"))?,
                b: l.weight(&format!("{name}.bias"))?,
            })
        };
        let tok_embd = l.weight("token_embd.weight")?;
        let pos_embd = l.weight("position_embd.weight")?;
        let token_types = l.optional("token_types.weight")?;
        let embd_norm = norm(l, "token_embd_norm")?;
        let mut blocks = Vec::with_capacity(n_layer);
        for i in 0..n_layer {
            let attn_norm = norm(l, &format!("blk.{i}.attn_output_norm"))?;
            let out_norm = norm(l, &format!("blk.{i}.layer_output_norm"))?;
            blocks.push(Block {
                wq: l.layer(i, "attn_q.weight")?,
                bq: l.layer(i, "attn_q.bias")?,
                wk: l.layer(i, "attn_k.weight")?,
                bk: l.layer(i, "attn_k.bias")?,
                wv: l.layer(i, "attn_v.weight")?,
                bv: l.layer(i, "attn_v.bias")?,
                wo: l.layer(i, "attn_output.weight")?,
                bo: l.layer(i, "attn_output.bias")?,
                up: l.layer(i, "ffn_up.weight")?,
                bup: l.layer(i, "ffn_up.bias")?,
                down: l.layer(i, "ffn_down.weight")?,
                bdown: l.layer(i, "ffn_down.bias")?,
                attn_norm,
                out_norm,
            });
        }
        l.check(
            tok_embd.cols == n_embd && pos_embd.cols == n_embd,
            "embedding_length",
            "does not match the embedding tables",
        )?;
        Ok(Bert {
            info: ModelInfo {
                architecture: l.arch().to_string(),
                n_vocab: tok_embd.rows,
                n_layer,
                n_embd,
                n_ctx_train: n_ctx_train.min(pos_embd.rows),
            },
            n_head,
            head_dim: n_embd / n_head,
            eps,
            pooling,
            tok_embd,
            pos_embd,
            token_types,
            embd_norm,
            blocks,
        })
    }

    /// Shape facts; `n_ctx_train` is the number of learned positions (the longest input).
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// Records the encoder over the step's rows (sequences laid out as `spans`, positions
    /// from 0 in each) and returns one pooled row per span (`spans.len() × n_embd`), or with
    /// `pool = None` the hidden state of every row.
    pub fn build(&self, g: &mut Graph, spans: &[SeqSpan], pool: Option<PoolMode>) -> TensorId {
        let mut x = g.embed(self.tok_embd, 1.0);
        let p = g.embed_rows(self.pos_embd, RowIndex::Positions);
        x = g.add(x, p);
        if let Some(tt) = self.token_types {
            let t = g.embed_rows(tt, RowIndex::Fixed(0));
            x = g.add(x, t);
        }
        let ln =
            |g: &mut Graph, x: TensorId, n: Norm| g.layer_norm(x, Some(n.w), Some(n.b), self.eps);
        x = ln(g, x, self.embd_norm);
        let hd = self.head_dim;
        let scale = 1.0 / (hd as f32).sqrt();
        for b in &self.blocks {
            let lin = |g: &mut Graph, w: Weight, bias: Weight, x: TensorId| {
                let t = g.matmul(w, x);
                g.add_bias(t, bias)
            };
            let q = lin(g, b.wq, b.bq, x);
            let k = lin(g, b.wk, b.bk, x);
            let v = lin(g, b.wv, b.bv, x);
            let a =
                g.encoder_attention(q, k, v, self.n_head, self.n_head, hd, scale, spans.to_vec());
            let a = lin(g, b.wo, b.bo, a);
            let h = g.add(x, a);
            let h = ln(g, h, b.attn_norm);
            let f = lin(g, b.up, b.bup, h);
            let f = g.gelu_erf(f);
            let f = lin(g, b.down, b.bdown, f);
            let o = g.add(h, f);
            x = ln(g, o, b.out_norm);
        }
        match pool {
            Some(mode) => g.pool(x, spans.to_vec(), mode),
            None => x,
        }
    }
}
