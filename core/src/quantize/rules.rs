//! Which type each tensor gets: llama.cpp's rules (`llama-quant.cpp`), for the file types
//! Weft writes.
//!
//! - Only weights of two or more dimensions whose name ends in `weight` are quantized, never
//!   norms, expert routers, positional or token-type embeddings, and a few small special
//!   tensors; everything else keeps its type.
//! - The output projection (and the token embedding when it doubles as the output, i.e. the
//!   file has no `output.weight`) gets Q6_K, or Q8_0 when its rows do not split into blocks of
//!   the default type (and for Q8_0 files, which it stays).
//! - The `_M` and `_S` mixes give some attention-value and feed-forward-down layers more bits,
//!   as llama.cpp does, counting those tensors in its order (first the non-layer tensors,
//!   then layer by layer, by name within a layer).
//! - A tensor whose rows do not split into blocks of its type falls back to a 32-block type
//!   (Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0), or to F16 when even that does not fit.

use super::ftype::FileType;
use crate::dtype::GgmlType;
use crate::gguf::Gguf;

/// The model facts the rules read.
#[derive(Clone, Debug, Default)]
pub struct ModelShape {
    pub arch: String,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub n_expert: usize,
}

impl ModelShape {
    /// Reads the shape from a header (missing keys count as 0, which the rules treat as
    /// "not a mixture-of-experts / not grouped").
    pub fn of(g: &Gguf) -> ModelShape {
        let arch = g.architecture().unwrap_or_default().to_string();
        let num = |k: &str| g.arch_key(k).and_then(|v| v.as_u64()).unwrap_or(0) as usize;
        // head_count may be an array (one per layer); the first entry is what matters here.
        let head = |k: &str| {
            g.arch_key(k)
                .and_then(|v| {
                    v.as_u64()
                        .or_else(|| v.as_array()?.first()?.as_u64())
                        .map(|n| n as usize)
                })
                .unwrap_or(0)
        };
        ModelShape {
            n_layer: num("block_count"),
            n_head: head("attention.head_count"),
            n_head_kv: head("attention.head_count_kv"),
            n_expert: num("expert_count"),
            arch,
        }
    }

    fn is_falcon(&self) -> bool {
        self.arch == "falcon"
    }

    /// llama.cpp's `LLM_TYPE_70B` test, the only model size its rules look at.
    fn is_llama_70b(&self) -> bool {
        self.arch == "llama" && self.n_layer == 80 && self.n_head != self.n_head_kv
    }
}

/// A tensor as the rules see it.
#[derive(Clone, Debug)]
pub struct TensorDesc<'a> {
    pub name: &'a str,
    /// Innermost first.
    pub dims: &'a [u64],
    pub ty: GgmlType,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Category {
    TokenEmbd,
    AttnQ,
    AttnK,
    AttnV,
    AttnQkv,
    AttnKvB,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Output,
    Other,
}

impl Category {
    fn of(name: &str) -> Category {
        use Category::*;
        if name == "output.weight" {
            return Output;
        }
        if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
            return TokenEmbd;
        }
        let pairs = [
            ("attn_qkv.weight", AttnQkv),
            ("attn_kv_b.weight", AttnKvB),
            ("attn_v.weight", AttnV),
            ("attn_k.weight", AttnK),
            ("attn_q.weight", AttnQ),
            ("attn_output.weight", AttnOutput),
            ("ffn_up", FfnUp),
            ("ffn_gate", FfnGate),
            ("ffn_down", FfnDown),
        ];
        pairs
            .iter()
            .find(|(pat, _)| name.contains(pat))
            .map_or(Other, |(_, c)| *c)
    }

    fn is_attn_v(self) -> bool {
        matches!(
            self,
            Category::AttnV | Category::AttnQkv | Category::AttnKvB
        )
    }
}

/// GGML's `ggml_n_dims`: trailing dimensions of size 1 do not count.
fn effective_dims(dims: &[u64]) -> usize {
    (1..dims.len())
        .rev()
        .find(|&i| dims[i] > 1)
        .map_or(1, |i| i + 1)
}

/// Whether llama.cpp would quantize this tensor at all.
pub fn allows_quantization(name: &str, dims: &[u64]) -> bool {
    if effective_dims(dims) < 2 || !name.ends_with("weight") {
        return false;
    }
    // Positional and token-type embeddings (BERT) are matched by their full names.
    if name == "position_embd.weight" || name == "token_types.weight" {
        return false;
    }
    const NEVER: [&str; 35] = [
        "_norm.weight",
        "ffn_gate_inp.weight",
        "ffn_gate_tid2eid.weight",
        "altup",
        "laurel",
        "per_layer_model_proj",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "indexer.k_proj.weight",
        "indexer.q_proj.weight",
        "time_mix_first.weight",
        "time_mix_w0.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_v0.weight",
        "time_mix_v1.weight",
        "time_mix_v2.weight",
        "time_mix_a0.weight",
        "time_mix_a1.weight",
        "time_mix_a2.weight",
        "time_mix_g1.weight",
        "time_mix_g2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",
        "attn_rel_b.weight",
        ".position_embd",
        "sam.pos_embd",
        "sam.neck.",
        "sam.net_",
        ".rel_pos",
        ".patch_embd",
        ".patch_merger",
        "a.rvq.codebook",
        "mm.a.code_embd",
    ];
    !NEVER.iter().any(|p| name.contains(p))
}

/// The layer a `blk.N.` tensor belongs to (-1 for the others), as llama.cpp reads it.
fn layer_of(name: &str) -> i64 {
    let Some(rest) = name.strip_prefix("blk.") else {
        return -1;
    };
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().unwrap_or(-1)
}

/// The order llama.cpp writes tensors in (and counts them for the mixes): non-layer tensors
/// first, then by layer, by name within each. Returns indices into `tensors`.
pub fn llama_order(tensors: &[TensorDesc]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..tensors.len()).collect();
    idx.sort_by(|&a, &b| {
        let (na, nb) = (tensors[a].name, tensors[b].name);
        layer_of(na).cmp(&layer_of(nb)).then_with(|| na.cmp(nb))
    });
    idx
}

/// Counters llama.cpp keeps while it walks the tensors.
struct Walk<'s> {
    shape: &'s ModelShape,
    ftype: FileType,
    tied_embeddings: bool,
    n_attention_wv: usize,
    i_attention_wv: usize,
    i_ffn_down: usize,
    i_ffn_gate: usize,
    i_ffn_up: usize,
}

fn use_more_bits(i: usize, n: usize) -> bool {
    let (i, n) = (i as i64, n as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

impl Walk<'_> {
    /// The layer index llama.cpp uses for a feed-forward tensor: its running count, or the
    /// `blk.N` number in mixture-of-experts models.
    fn layer(&self, counter: usize, name: &str) -> usize {
        if self.shape.n_expert > 1 {
            layer_of(name).max(0) as usize
        } else {
            counter
        }
    }

    /// llama.cpp's `llama_tensor_get_type_impl` for the file types Weft writes.
    fn mix_type(&mut self, mut ty: GgmlType, t: &TensorDesc, cat: Category) -> GgmlType {
        use FileType as F;
        use GgmlType as G;
        let ft = self.ftype;
        let n_layer = self.shape.n_layer;
        if cat == Category::Output || (self.tied_embeddings && cat == Category::TokenEmbd) {
            let nx = t.dims[0];
            if self.shape.is_falcon() || !nx.is_multiple_of(ty.block_size() as u64) {
                ty = G::Q8_0;
            } else if ty != G::Q8_0 {
                ty = G::Q6_K;
            }
        } else if cat == Category::TokenEmbd {
            // Kept at the default type.
        } else if cat.is_attn_v() {
            if matches!(ft, F::Q4_K_M | F::Q5_K_M)
                && use_more_bits(self.i_attention_wv, self.n_attention_wv)
            {
                ty = G::Q6_K;
            } else if ft == F::Q4_K_S && self.i_attention_wv < 4 {
                ty = G::Q5_K;
            }
            if self.shape.is_llama_70b() && matches!(ty, G::Q3_K | G::Q4_K) {
                ty = G::Q5_K;
            }
            if self.shape.n_expert == 8 {
                ty = G::Q8_0;
            }
            self.i_attention_wv += 1;
        } else if cat == Category::AttnK {
            if self.shape.n_expert == 8 {
                ty = G::Q8_0;
            }
        } else if cat == Category::FfnDown {
            let i = self.layer(self.i_ffn_down, t.name);
            let falcon = self.shape.is_falcon();
            if ft == F::Q4_K_M {
                if falcon {
                    ty = if i < n_layer / 16 {
                        G::Q6_K
                    } else if use_more_bits(i, n_layer) {
                        G::Q5_K
                    } else {
                        G::Q4_K
                    };
                } else if use_more_bits(i, n_layer) {
                    ty = G::Q6_K;
                }
            } else if ft == F::Q5_K_M && use_more_bits(i, n_layer) {
                ty = G::Q6_K;
            } else if ft == F::Q4_K_S && !falcon && i < n_layer / 8 {
                ty = G::Q5_K;
            }
            self.i_ffn_down += 1;
        } else if cat == Category::AttnOutput {
            if !self.shape.is_falcon()
                && self.shape.n_expert == 8
                && matches!(ft, F::Q4_K_S | F::Q4_K_M)
            {
                ty = G::Q5_K;
            }
        } else if cat == Category::AttnQkv {
            if ft == F::Q4_K_M {
                ty = G::Q5_K;
            } else if ft == F::Q5_K_M {
                ty = G::Q6_K;
            }
        } else if cat == Category::FfnGate {
            self.i_ffn_gate += 1;
        } else if cat == Category::FfnUp {
            self.i_ffn_up += 1;
        }
        ty
    }
}

/// A 32-element-block type for a tensor whose rows do not split into `ty`'s blocks, as
/// llama.cpp's `tensor_type_fallback` picks it; F16 when even 32 does not divide the rows.
fn fallback(ty: GgmlType, ncols: u64) -> GgmlType {
    if ncols.is_multiple_of(ty.block_size() as u64) {
        return ty;
    }
    let next = match ty {
        GgmlType::Q4_K => GgmlType::Q5_0,
        GgmlType::Q5_K => GgmlType::Q5_1,
        GgmlType::Q6_K => GgmlType::Q8_0,
        other => other,
    };
    if ncols.is_multiple_of(next.block_size() as u64) {
        next
    } else {
        GgmlType::F16
    }
}

/// The type of every tensor, given in llama.cpp's order (see [`llama_order`]): `tensors[i]`
/// gets `result[i]`. With `pure`, every quantizable tensor gets the default type (subject to
/// the block-size fallback), as `llama-quantize --pure` does.
pub fn choose_types(
    tensors: &[TensorDesc],
    shape: &ModelShape,
    ftype: FileType,
    pure: bool,
) -> Vec<GgmlType> {
    let cats: Vec<Category> = tensors.iter().map(|t| Category::of(t.name)).collect();
    let mut walk = Walk {
        shape,
        ftype,
        tied_embeddings: !cats.contains(&Category::Output),
        n_attention_wv: cats.iter().filter(|c| c.is_attn_v()).count(),
        i_attention_wv: 0,
        i_ffn_down: 0,
        i_ffn_gate: 0,
        i_ffn_up: 0,
    };
    tensors
        .iter()
        .zip(&cats)
        .map(|(t, &cat)| {
            if !allows_quantization(t.name, t.dims) {
                return t.ty;
            }
            let mut ty = ftype.default_type();
            if ftype.is_quantized() {
                if !pure {
                    ty = walk.mix_type(ty, t, cat);
                }
                ty = fallback(ty, t.dims[0]);
            }
            ty
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_puts_layers_after_globals_by_number() {
        let names = [
            "blk.10.attn_q.weight",
            "output_norm.weight",
            "blk.2.ffn_down.weight",
            "blk.2.attn_k.weight",
            "token_embd.weight",
        ];
        let dims = [4u64, 4];
        let t: Vec<TensorDesc> = names
            .iter()
            .map(|n| TensorDesc {
                name: n,
                dims: &dims,
                ty: GgmlType::F32,
            })
            .collect();
        let order: Vec<&str> = llama_order(&t).iter().map(|&i| names[i]).collect();
        assert_eq!(
            order,
            [
                "output_norm.weight",
                "token_embd.weight",
                "blk.2.attn_k.weight",
                "blk.2.ffn_down.weight",
                "blk.10.attn_q.weight"
            ]
        );
    }

    #[test]
    fn which_tensors_are_quantized() {
        assert!(allows_quantization("blk.0.attn_q.weight", &[64, 64]));
        assert!(!allows_quantization("blk.0.attn_norm.weight", &[64]));
        assert!(!allows_quantization("blk.0.attn_q.bias", &[64, 64]));
        assert!(!allows_quantization("blk.0.attn_q.weight", &[64, 1]));
        assert!(!allows_quantization("blk.0.ffn_gate_inp.weight", &[64, 8]));
        assert!(!allows_quantization("position_embd.weight", &[64, 512]));
    }

    #[test]
    fn q4_k_m_mix_on_a_small_llama() {
        // 4 layers of 256-wide tensors, tied embeddings.
        let dims = [256u64, 256];
        let down = [1024u64, 256];
        let mut names = vec!["token_embd.weight".to_string(), "output_norm.weight".into()];
        for l in 0..4 {
            for t in ["attn_v", "attn_q", "ffn_down", "attn_norm"] {
                names.push(format!("blk.{l}.{t}.weight"));
            }
        }
        let t: Vec<TensorDesc> = names
            .iter()
            .map(|n| TensorDesc {
                name: n,
                dims: if n.contains("norm") {
                    &dims[..1]
                } else if n.contains("down") {
                    &down
                } else {
                    &dims
                },
                ty: GgmlType::F16,
            })
            .collect();
        let order = llama_order(&t);
        let ordered: Vec<TensorDesc> = order.iter().map(|&i| t[i].clone()).collect();
        let shape = ModelShape {
            arch: "llama".into(),
            n_layer: 4,
            n_head: 4,
            n_head_kv: 4,
            n_expert: 0,
        };
        let types = choose_types(&ordered, &shape, FileType::Q4_K_M, false);
        let of = |n: &str| types[ordered.iter().position(|t| t.name == n).unwrap()];
        assert_eq!(of("token_embd.weight"), GgmlType::Q6_K);
        assert_eq!(of("output_norm.weight"), GgmlType::F16);
        // use_more_bits(i, 4) in integers: i < 0 never; i >= 3 → layer 3; i % 3 == 2 → layer 2.
        assert_eq!(of("blk.0.attn_v.weight"), GgmlType::Q4_K);
        assert_eq!(of("blk.3.attn_v.weight"), GgmlType::Q6_K);
        assert_eq!(of("blk.1.attn_v.weight"), GgmlType::Q4_K);
        assert_eq!(of("blk.2.attn_v.weight"), GgmlType::Q6_K);
        assert_eq!(of("blk.3.ffn_down.weight"), GgmlType::Q6_K);
        assert_eq!(of("blk.1.ffn_down.weight"), GgmlType::Q4_K);
        assert_eq!(of("blk.1.attn_q.weight"), GgmlType::Q4_K);
        let pure = choose_types(&ordered, &shape, FileType::Q4_K_M, true);
        assert!(pure
            .iter()
            .zip(&ordered)
            .all(|(ty, t)| t.name.contains("norm") || *ty == GgmlType::Q4_K));
    }

    #[test]
    fn rows_that_do_not_fit_fall_back() {
        assert_eq!(fallback(GgmlType::Q4_K, 576), GgmlType::Q5_0);
        assert_eq!(fallback(GgmlType::Q6_K, 576), GgmlType::Q8_0);
        assert_eq!(fallback(GgmlType::Q5_K, 576), GgmlType::Q5_1);
        assert_eq!(fallback(GgmlType::Q8_0, 48), GgmlType::F16);
        assert_eq!(fallback(GgmlType::Q4_K, 512), GgmlType::Q4_K);
    }
}
