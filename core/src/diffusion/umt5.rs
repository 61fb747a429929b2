//! Wan's text encoder: the encoder half of UMT5 (`UMT5EncoderModel` in transformers), loaded
//! from a diffusers folder's `text_encoder/` (config.json + model.safetensors) or a UMT5 GGUF
//! (`umt5_gguf`) and run in f32 on the CPU.
//!
//! Why plain f32 loops and not a graph on the backend trait: UMT5 attention adds a learned
//! per-head bias indexed by the bucketed distance between query and key, which none of the
//! graph's attention ops ([`crate::backend::Op::EncoderAttention`] included) can take; adding
//! that op to every backend is its own piece of work. The encoder runs once per prompt, so
//! this direct implementation is what the pipeline uses until the op exists.
//!
//! Facts followed (transformers 4.57's modeling_umt5.py, see tests/data/video/README.md):
//! every layer has its own relative-attention bias (T5 has one in layer 0 only); scores are
//! not scaled by 1/sqrt(d_kv); norms are T5 RMS norms (no mean, no bias); the feed-forward is
//! `wo(gelu_new(wi_0 x) * wi_1 x)`; a final RMS norm ends the stack; padding keys get the f32
//! minimum added to their scores.

use std::path::Path;

use super::files::{read_config, ModelFileError, WeightFile, Weights};

use super::umt5_buckets::relative_position_bucket;

/// What can go wrong loading or running it (the error of every diffusion component).
pub type Umt5Error = ModelFileError;

/// The hyper-parameters the encoder needs, from the folder's config.json.
#[derive(Debug, Clone, PartialEq)]
pub struct Umt5Config {
    pub vocab_size: usize,
    pub d_model: usize,
    pub d_kv: usize,
    pub d_ff: usize,
    pub num_heads: usize,
    pub num_layers: usize,
    pub num_buckets: usize,
    pub max_distance: usize,
    pub eps: f32,
}

impl Umt5Config {
    /// Reads a transformers UMT5 / T5 config.json; only the encoder's gated-GELU variant (what
    /// Wan ships) is accepted.
    pub fn from_json(path: &Path) -> Result<Self, Umt5Error> {
        let bad = |message: String| Umt5Error::Config {
            path: path.display().to_string(),
            message,
        };
        let v = read_config(path)?;
        let int = |key: &str| -> Result<usize, Umt5Error> {
            v[key]
                .as_u64()
                .filter(|&n| n > 0)
                .map(|n| n as usize)
                .ok_or_else(|| bad(format!("{key} must be a positive integer")))
        };
        let ff = v["feed_forward_proj"].as_str().unwrap_or("relu");
        let act = v["dense_act_fn"].as_str().unwrap_or("");
        if ff != "gated-gelu" || act != "gelu_new" {
            return Err(bad(format!(
                "feed_forward_proj {ff:?} with dense_act_fn {act:?} is not supported \
                 (only gated-gelu with gelu_new, as Wan's UMT5)"
            )));
        }
        let eps = v["layer_norm_epsilon"]
            .as_f64()
            .ok_or_else(|| bad("layer_norm_epsilon must be a number".into()))?;
        let (num_buckets, max_distance) = (
            int("relative_attention_num_buckets")?,
            int("relative_attention_max_distance")?,
        );
        // The bucket function needs an exact range of at least one and log-spaced buckets
        // reaching past it.
        if num_buckets < 4 || max_distance <= num_buckets / 4 {
            return Err(bad(format!(
                "relative_attention_num_buckets {num_buckets} with max distance {max_distance} \
                 leaves no exact or no log-spaced buckets"
            )));
        }
        Ok(Umt5Config {
            vocab_size: int("vocab_size")?,
            d_model: int("d_model")?,
            d_kv: int("d_kv")?,
            d_ff: int("d_ff")?,
            num_heads: int("num_heads")?,
            num_layers: int("num_layers")?,
            num_buckets,
            max_distance,
            eps: eps as f32,
        })
    }

    fn inner(&self) -> usize {
        self.num_heads * self.d_kv
    }
}

/// One encoder block's weights, row-major as stored (`[out, in]` for projections).
struct Block {
    attn_norm: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    o: Vec<f32>,
    /// `[num_buckets, num_heads]`.
    rel_bias: Vec<f32>,
    ff_norm: Vec<f32>,
    wi_0: Vec<f32>,
    wi_1: Vec<f32>,
    wo: Vec<f32>,
}

/// A loaded UMT5 encoder.
pub struct Umt5Encoder {
    pub config: Umt5Config,
    embed: Vec<f32>,
    blocks: Vec<Block>,
    final_norm: Vec<f32>,
}

impl Umt5Encoder {
    /// Loads `dir` (a diffusers `text_encoder/` folder: config.json and model.safetensors).
    pub fn load(dir: &Path) -> Result<Self, Umt5Error> {
        let config = Umt5Config::from_json(&dir.join("config.json"))?;
        let path = dir.join("model.safetensors");
        let file = WeightFile::read(&path)?;
        Self::from_weights(config, &file.tensors()?)
    }

    /// The encoder from `w`'s tensors (asked for by transformers' names), shaped by `config`:
    /// the one reader behind [`Self::load`] and the GGUF loader (`umt5_gguf`).
    pub(super) fn from_weights(config: Umt5Config, w: &Weights) -> Result<Self, Umt5Error> {
        let (d, inner, ff) = (config.d_model, config.inner(), config.d_ff);
        let embed = w.get("shared.weight", &[config.vocab_size, d])?;
        let mut blocks = Vec::with_capacity(config.num_layers);
        for i in 0..config.num_layers {
            let a = format!("encoder.block.{i}.layer.0");
            let f = format!("encoder.block.{i}.layer.1");
            blocks.push(Block {
                attn_norm: w.get(&format!("{a}.layer_norm.weight"), &[d])?,
                q: w.get(&format!("{a}.SelfAttention.q.weight"), &[inner, d])?,
                k: w.get(&format!("{a}.SelfAttention.k.weight"), &[inner, d])?,
                v: w.get(&format!("{a}.SelfAttention.v.weight"), &[inner, d])?,
                o: w.get(&format!("{a}.SelfAttention.o.weight"), &[d, inner])?,
                rel_bias: w.get(
                    &format!("{a}.SelfAttention.relative_attention_bias.weight"),
                    &[config.num_buckets, config.num_heads],
                )?,
                ff_norm: w.get(&format!("{f}.layer_norm.weight"), &[d])?,
                wi_0: w.get(&format!("{f}.DenseReluDense.wi_0.weight"), &[ff, d])?,
                wi_1: w.get(&format!("{f}.DenseReluDense.wi_1.weight"), &[ff, d])?,
                wo: w.get(&format!("{f}.DenseReluDense.wo.weight"), &[d, ff])?,
            });
        }
        let final_norm = w.get("encoder.final_layer_norm.weight", &[d])?;
        Ok(Umt5Encoder {
            config,
            embed,
            blocks,
            final_norm,
        })
    }

    /// The encoder's last hidden state, `[ids.len(), d_model]` row-major, for token `ids`
    /// with attention `mask` (1 = a real token, 0 = padding, which no query attends to).
    /// Rows of padding positions are computed like the others (as transformers does); the
    /// pipeline's zeroing of them is [`zero_padding_rows`].
    pub fn encode(&self, ids: &[u32], mask: &[u8]) -> Result<Vec<f32>, Umt5Error> {
        let c = &self.config;
        let n = ids.len();
        if n == 0 {
            return Err(Umt5Error::Input("no tokens to encode".into()));
        }
        if mask.len() != n {
            return Err(Umt5Error::Input(format!(
                "{} tokens but {} mask values",
                n,
                mask.len()
            )));
        }
        let d = c.d_model;
        let mut x = Vec::with_capacity(n * d);
        for &id in ids {
            let id = id as usize;
            if id >= c.vocab_size {
                return Err(Umt5Error::Input(format!(
                    "token id {id} is outside the vocabulary (size {})",
                    c.vocab_size
                )));
            }
            x.extend_from_slice(&self.embed[id * d..(id + 1) * d]);
        }
        // Bucket of each (query, key) pair, shared by every layer (each has its own table).
        let buckets: Vec<usize> = (0..n * n)
            .map(|qk| {
                let rel = (qk % n) as i64 - (qk / n) as i64;
                relative_position_bucket(rel, c.num_buckets, c.max_distance)
            })
            .collect();
        for block in &self.blocks {
            let h = rms_norm(&x, &block.attn_norm, d, c.eps);
            let a = self.attention(block, &h, &buckets, mask);
            add_in_place(&mut x, &a);
            let h = rms_norm(&x, &block.ff_norm, d, c.eps);
            let f = self.feed_forward(block, &h);
            add_in_place(&mut x, &f);
        }
        Ok(rms_norm(&x, &self.final_norm, d, c.eps))
    }

    fn attention(&self, b: &Block, h: &[f32], buckets: &[usize], mask: &[u8]) -> Vec<f32> {
        let c = &self.config;
        let (n, d, inner, dk, heads) = (mask.len(), c.d_model, c.inner(), c.d_kv, c.num_heads);
        let q = linear(h, &b.q, n, d, inner);
        let k = linear(h, &b.k, n, d, inner);
        let v = linear(h, &b.v, n, d, inner);
        let mut ctx = vec![0f32; n * inner];
        let mut scores = vec![0f32; n];
        for head in 0..heads {
            let off = head * dk;
            for i in 0..n {
                let qi = &q[i * inner + off..i * inner + off + dk];
                for (j, s) in scores.iter_mut().enumerate() {
                    let kj = &k[j * inner + off..j * inner + off + dk];
                    let dot = qi.iter().zip(kj).fold(0f32, |acc, (a, b)| acc + a * b);
                    // transformers adds the mask to the bias first, then the sum to the score.
                    let mut bias = b.rel_bias[buckets[i * n + j] * heads + head];
                    if mask[j] == 0 {
                        bias += f32::MIN;
                    }
                    *s = dot + bias;
                }
                softmax_in_place(&mut scores);
                let out = &mut ctx[i * inner + off..i * inner + off + dk];
                for (j, &p) in scores.iter().enumerate() {
                    let vj = &v[j * inner + off..j * inner + off + dk];
                    for (o, &vv) in out.iter_mut().zip(vj) {
                        *o += p * vv;
                    }
                }
            }
        }
        linear(&ctx, &b.o, n, inner, d)
    }

    fn feed_forward(&self, b: &Block, h: &[f32]) -> Vec<f32> {
        let c = &self.config;
        let n = h.len() / c.d_model;
        let mut gate = linear(h, &b.wi_0, n, c.d_model, c.d_ff);
        let up = linear(h, &b.wi_1, n, c.d_model, c.d_ff);
        for (g, u) in gate.iter_mut().zip(&up) {
            *g = gelu_tanh(*g) * u;
        }
        linear(&gate, &b.wo, n, c.d_ff, c.d_model)
    }
}

/// What Wan's pipeline does to the encoder output: keeps the rows of the first `mask`-count
/// positions (the real tokens, which come first) and zeroes the rest.
pub fn zero_padding_rows(encoded: &mut [f32], mask: &[u8], d_model: usize) {
    let kept = mask.iter().filter(|&&m| m != 0).count();
    for v in encoded.iter_mut().skip(kept * d_model) {
        *v = 0.0;
    }
}

/// `x W^T` for `n` rows of `k` values and a `[m, k]` weight.
pub(super) fn linear(x: &[f32], w: &[f32], n: usize, k: usize, m: usize) -> Vec<f32> {
    let mut out = vec![0f32; n * m];
    for (row, o) in x.chunks_exact(k).zip(out.chunks_exact_mut(m)) {
        for (oj, wj) in o.iter_mut().zip(w.chunks_exact(k)) {
            *oj = row.iter().zip(wj).fold(0f32, |acc, (a, b)| acc + a * b);
        }
    }
    out
}

/// T5's RMS norm: `weight * x / sqrt(mean(x^2) + eps)`, per row.
fn rms_norm(x: &[f32], weight: &[f32], d: usize, eps: f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let var = row.iter().map(|v| v * v).sum::<f32>() / d as f32;
        let r = 1.0 / (var + eps).sqrt();
        out.extend(row.iter().zip(weight).map(|(v, w)| w * (v * r)));
    }
    out
}

pub(super) fn softmax_in_place(s: &mut [f32]) {
    let max = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for v in s.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in s.iter_mut() {
        *v /= sum;
    }
}

/// transformers' `gelu_new`: the tanh approximation of GELU.
pub(super) fn gelu_tanh(x: f32) -> f32 {
    let c = (2.0f64 / std::f64::consts::PI).sqrt() as f32;
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

pub(super) fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}
