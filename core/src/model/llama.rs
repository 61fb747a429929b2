//! Llama-style decoders (Llama 2/3, SmolLM2, TinyLlama, Mistral; Qwen2 with [`Variant::Qwen2`]):
//! pre-RMSNorm blocks, rotary attention with grouped key/value heads, SwiGLU feed-forward.
//!
//! Per block: `h = x + Wo·attn(rope(Wq·n), rope(Wk·n), Wv·n)` with `n = rmsnorm(x)·attn_norm`,
//! then `x' = h + Wdown·(silu(Wgate·m) ⊙ Wup·m)` with `m = rmsnorm(h)·ffn_norm`.

use super::common::{BlockWeights, Loader, ModelInfo};
use super::{Model, ModelError};
use crate::backend::{Graph, KvCacheId, KvLayerSpec, MultiRope, TensorId, Weight};

/// Which member of the family: they differ in RoPE layout and attention biases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Normal RoPE (adjacent pairs; GGUF conversion permutes Q/K rows for it), no biases.
    Llama,
    /// NeoX RoPE and biases on the Q, K and V projections.
    Qwen2,
}

struct Block {
    w: BlockWeights,
    bq: Option<Weight>,
    bk: Option<Weight>,
    bv: Option<Weight>,
}

/// A loaded Llama-family model.
pub struct Llama {
    info: ModelInfo,
    variant: Variant,
    n_head: usize,
    n_head_kv: usize,
    head_dim: usize,
    n_rot: usize,
    rope_base: f32,
    eps: f32,
    tok_embd: Weight,
    rope_freqs: Option<Weight>,
    /// M-RoPE sections (rotated pairs per position component), for `qwen2vl`.
    rope_sections: Option<[u32; 4]>,
    blocks: Vec<Block>,
    output_norm: Weight,
    output: Weight,
}

impl Llama {
    /// Reads hyper-parameters and weights.
    pub fn load(l: &mut Loader, variant: Variant) -> Result<Self, ModelError> {
        let n_embd = l.usize("embedding_length")?;
        let n_layer = l.usize("block_count")?;
        let (n_head, n_head_kv) = l.head_counts()?;
        let head_dim = l.usize_or("attention.key_length", n_embd / n_head)?;
        let n_rot = l.usize_or("rope.dimension_count", head_dim)?;
        l.check(
            n_rot <= head_dim && n_rot.is_multiple_of(2),
            "rope.dimension_count",
            "must be even and at most the head size",
        )?;
        let rope_base = l.f32_opt("rope.freq_base")?.unwrap_or(10000.0);
        let eps = l
            .f32_opt("attention.layer_norm_rms_epsilon")?
            .unwrap_or(1e-5);
        let n_ctx_train = l.usize_or("context_length", 2048)?;

        let tok_embd = l.weight("token_embd.weight")?;
        let rope_freqs = l.optional("rope_freqs.weight")?;
        let mut blocks = Vec::with_capacity(n_layer);
        for i in 0..n_layer {
            let bias = |l: &mut Loader, name: &str| -> Result<Option<Weight>, ModelError> {
                match variant {
                    Variant::Qwen2 => l.layer(i, name).map(Some),
                    Variant::Llama => l.optional(&format!("blk.{i}.{name}")),
                }
            };
            blocks.push(Block {
                w: BlockWeights::load(l, i)?,
                bq: bias(l, "attn_q.bias")?,
                bk: bias(l, "attn_k.bias")?,
                bv: bias(l, "attn_v.bias")?,
            });
        }
        let output_norm = l.weight("output_norm.weight")?;
        // Models with tied embeddings have no separate output matrix.
        let output = l.optional("output.weight")?.unwrap_or(tok_embd);
        Ok(Llama {
            info: ModelInfo {
                architecture: l.arch().to_string(),
                n_vocab: output.rows,
                n_layer,
                n_embd,
                n_ctx_train,
            },
            variant,
            n_head,
            n_head_kv,
            head_dim,
            n_rot,
            rope_base,
            eps,
            tok_embd,
            rope_freqs,
            rope_sections: None,
            blocks,
            output_norm,
            output,
        })
    }
}

impl Llama {
    /// Turns on multimodal rotary positions with these sections (checked to fit the rotated
    /// pairs of a head).
    pub fn set_rope_sections(&mut self, sections: [u32; 4]) -> Result<(), ModelError> {
        let pairs: u32 = sections.iter().sum();
        if pairs as usize > self.n_rot / 2 || self.rope_freqs.is_some() {
            return Err(ModelError::Metadata {
                key: format!("{}.rope.dimension_sections", self.info.architecture),
                message: format!(
                    "sections {sections:?} hold more than the {} rotated pairs of a head (or \
                     the model also has rope_freqs)",
                    self.n_rot / 2
                ),
            });
        }
        self.rope_sections = Some(sections);
        Ok(())
    }
}

impl Model for Llama {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn kv_layers(&self, n_ctx: usize, _max_batch: usize) -> Vec<KvLayerSpec> {
        let spec = KvLayerSpec {
            n_kv_head: self.n_head_kv,
            head_dim_k: self.head_dim,
            head_dim_v: self.head_dim,
            capacity: n_ctx,
            window: None,
        };
        vec![spec; self.blocks.len()]
    }

    fn rope_sections(&self) -> Option<[u32; 4]> {
        self.rope_sections
    }

    fn build(&self, g: &mut Graph, kv: KvCacheId, output_rows: &[u32]) -> TensorId {
        let x = self.build_hidden(g, kv, output_rows);
        g.matmul(self.output, x)
    }

    fn build_hidden(&self, g: &mut Graph, kv: KvCacheId, output_rows: &[u32]) -> TensorId {
        let neox = self.variant == Variant::Qwen2;
        let hd = self.head_dim;
        let scale = 1.0 / (hd as f32).sqrt();
        let mut x = g.embed(self.tok_embd, 1.0);
        for (il, blk) in self.blocks.iter().enumerate() {
            let b = &blk.w;
            let n = g.rms_norm(x, Some(b.attn_norm), self.eps, self.info.n_embd);
            let proj = |g: &mut Graph, w: Weight, bias: Option<Weight>| {
                let t = g.matmul(w, n);
                match bias {
                    Some(bias) => g.add_bias(t, bias),
                    None => t,
                }
            };
            let q = proj(g, b.wq, blk.bq);
            let k = proj(g, b.wk, blk.bk);
            let v = proj(g, b.wv, blk.bv);
            let (q, k) = match (self.rope_sections, g.rope_positions.clone()) {
                (Some(sec), Some(pos)) => {
                    let (r, base) = (self.n_rot, self.rope_base);
                    let q = g.rope_multi(q, hd, r, base, sec, MultiRope::Text, pos.clone());
                    (q, g.rope_multi(k, hd, r, base, sec, MultiRope::Text, pos))
                }
                // Without given positions every component is the step position: NeoX RoPE.
                _ => (
                    g.rope(q, hd, self.n_rot, self.rope_base, neox, self.rope_freqs),
                    g.rope(k, hd, self.n_rot, self.rope_base, neox, self.rope_freqs),
                ),
            };
            let stored = g.kv_store(kv, il, k, v);
            let a = g.attention(q, stored, kv, il, self.n_head, hd, scale);
            let a = g.matmul(b.wo, a);
            let h = g.add(x, a);
            let m = g.rms_norm(h, Some(b.ffn_norm), self.eps, self.info.n_embd);
            let gate = g.matmul(b.gate, m);
            let up = g.matmul(b.up, m);
            let f = g.swiglu(gate, up);
            let f = g.matmul(b.down, f);
            x = g.add(h, f);
        }
        let x = g.select_rows(x, output_rows.to_vec());
        g.rms_norm(x, Some(self.output_norm), self.eps, self.info.n_embd)
    }
}
