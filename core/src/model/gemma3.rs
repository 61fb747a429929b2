//! Gemma 3 (text): embeddings scaled by √d, RMSNorm before and after both attention and
//! feed-forward, RMSNorm of each query and key head, NeoX RoPE, GeGLU feed-forward, tied
//! output. Five of every six layers attend only to a sliding window (512 tokens for the small
//! models) with RoPE base 10 000; every sixth layer is global with the file's base (1e6).
//!
//! The GGUF conversion already folds Gemma's `1 + w` norm scaling into the stored weights,
//! so the norms here multiply by `w` as stored (their values sit around 1 + learned offset).

use super::common::{BlockWeights, Loader, ModelInfo};
use super::{Model, ModelError};
use crate::backend::{Graph, KvCacheId, KvLayerSpec, TensorId, Weight};

/// Layers per local/global cycle: layers `5, 11, 17, …` are global.
const SWA_PATTERN: usize = 6;
/// RoPE base of sliding-window layers when the file does not say.
const LOCAL_ROPE_BASE: f32 = 10_000.0;

struct Block {
    w: BlockWeights,
    q_norm: Weight,
    k_norm: Weight,
    post_attn_norm: Weight,
    post_ffn_norm: Weight,
    /// Sliding window, or None for a global layer.
    window: Option<usize>,
    rope_base: f32,
}

/// A loaded Gemma 3 model.
pub struct Gemma3 {
    info: ModelInfo,
    n_head: usize,
    n_head_kv: usize,
    head_dim_k: usize,
    head_dim_v: usize,
    eps: f32,
    /// Multiplies queries before attention (1/√query_pre_attn_scalar).
    q_scale: f32,
    softcap: Option<f32>,
    tok_embd: Weight,
    blocks: Vec<Block>,
    output_norm: Weight,
    output: Weight,
}

impl Gemma3 {
    /// Reads hyper-parameters and weights.
    pub fn load(l: &mut Loader) -> Result<Self, ModelError> {
        let n_embd = l.usize("embedding_length")?;
        let n_layer = l.usize("block_count")?;
        let (n_head, n_head_kv) = l.head_counts()?;
        let head_dim_k = l.usize_or("attention.key_length", n_embd / n_head)?;
        let head_dim_v = l.usize_or("attention.value_length", head_dim_k)?;
        l.check(
            head_dim_k.is_multiple_of(2),
            "attention.key_length",
            "must be even",
        )?;
        let eps = l
            .f32_opt("attention.layer_norm_rms_epsilon")?
            .unwrap_or(1e-6);
        let global_base = l.f32_opt("rope.freq_base")?.unwrap_or(1_000_000.0);
        let local_base = l.f32_opt("rope.freq_base_swa")?.unwrap_or(LOCAL_ROPE_BASE);
        let window = l.usize_or("attention.sliding_window", 512)?;
        l.check(window > 0, "attention.sliding_window", "must be positive")?;
        let n_ctx_train = l.usize_or("context_length", 32768)?;
        let softcap = l.f32_opt("final_logit_softcapping")?.filter(|&c| c > 0.0);
        // Gemma 3 27B scales queries by 1/√(d/heads); the other sizes by 1/√head_dim.
        let q_scale = if n_layer == 62 {
            1.0 / ((n_embd / n_head) as f32).sqrt()
        } else {
            1.0 / (head_dim_k as f32).sqrt()
        };

        let tok_embd = l.weight("token_embd.weight")?;
        let mut blocks = Vec::with_capacity(n_layer);
        for i in 0..n_layer {
            let local = i % SWA_PATTERN < SWA_PATTERN - 1;
            blocks.push(Block {
                w: BlockWeights::load(l, i)?,
                q_norm: l.layer(i, "attn_q_norm.weight")?,
                k_norm: l.layer(i, "attn_k_norm.weight")?,
                post_attn_norm: l.layer(i, "post_attention_norm.weight")?,
                post_ffn_norm: l.layer(i, "post_ffw_norm.weight")?,
                window: local.then_some(window),
                rope_base: if local { local_base } else { global_base },
            });
        }
        let output_norm = l.weight("output_norm.weight")?;
        let output = l.optional("output.weight")?.unwrap_or(tok_embd);
        Ok(Gemma3 {
            info: ModelInfo {
                architecture: l.arch().to_string(),
                n_vocab: output.rows,
                n_layer,
                n_embd,
                n_ctx_train,
            },
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            eps,
            q_scale,
            softcap,
            tok_embd,
            blocks,
            output_norm,
            output,
        })
    }
}

impl Model for Gemma3 {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn kv_layers(&self, n_ctx: usize, max_batch: usize) -> Vec<KvLayerSpec> {
        self.blocks
            .iter()
            .map(|b| KvLayerSpec {
                n_kv_head: self.n_head_kv,
                head_dim_k: self.head_dim_k,
                head_dim_v: self.head_dim_v,
                // A sliding layer keeps its window plus room for one step's new rows.
                capacity: b.window.map_or(n_ctx, |w| n_ctx.min(w + max_batch)),
                window: b.window,
            })
            .collect()
    }

    fn build(&self, g: &mut Graph, kv: KvCacheId, output_rows: &[u32]) -> TensorId {
        let x = self.build_hidden(g, kv, output_rows);
        let logits = g.matmul(self.output, x);
        match self.softcap {
            Some(c) => g.soft_cap(logits, c),
            None => logits,
        }
    }

    fn build_hidden(&self, g: &mut Graph, kv: KvCacheId, output_rows: &[u32]) -> TensorId {
        let d = self.info.n_embd;
        let (hk, hv) = (self.head_dim_k, self.head_dim_v);
        let mut x = g.embed(self.tok_embd, (d as f32).sqrt());
        for (il, b) in self.blocks.iter().enumerate() {
            let n = g.rms_norm(x, Some(b.w.attn_norm), self.eps, d);
            let q = g.matmul(b.w.wq, n);
            let k = g.matmul(b.w.wk, n);
            let v = g.matmul(b.w.wv, n);
            let q = g.rms_norm(q, Some(b.q_norm), self.eps, hk);
            let q = g.rope(q, hk, hk, b.rope_base, true, None);
            let k = g.rms_norm(k, Some(b.k_norm), self.eps, hk);
            let k = g.rope(k, hk, hk, b.rope_base, true, None);
            let q = g.scale(q, self.q_scale);
            let stored = g.kv_store(kv, il, k, v);
            let a = g.attention(q, stored, kv, il, self.n_head, hv, 1.0);
            let a = g.matmul(b.w.wo, a);
            let a = g.rms_norm(a, Some(b.post_attn_norm), self.eps, d);
            let h = g.add(a, x);
            let m = g.rms_norm(h, Some(b.w.ffn_norm), self.eps, d);
            let gate = g.matmul(b.w.gate, m);
            let up = g.matmul(b.w.up, m);
            let f = g.geglu(gate, up);
            let f = g.matmul(b.w.down, f);
            let f = g.rms_norm(f, Some(b.post_ffn_norm), self.eps, d);
            x = g.add(f, h);
        }
        let x = g.select_rows(x, output_rows.to_vec());
        g.rms_norm(x, Some(self.output_norm), self.eps, d)
    }
}
