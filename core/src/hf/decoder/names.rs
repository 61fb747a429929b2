//! Hugging Face decoder tensor names → llama.cpp's GGUF names, and what the conversion does to
//! a tensor's values on the way (gguf-py's `TensorNameMap` and the `modify_tensors` of
//! llama.cpp's `LlamaModel`/`Qwen2Model`/`Gemma3Model`).

use super::config::Family;

/// What happens to a tensor's values besides the name change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transform {
    None,
    /// Llama's rotary layout: Hugging Face checkpoints store q/k rows in the "rotate half"
    /// order; llama.cpp's llama kernels use interleaved pairs, so the converter reorders the
    /// rows of each head (`LlamaModel.permute`). The number is the head count of the tensor.
    PermuteRope(usize),
    /// Gemma's RMSNorm multiplies by `1 + w`; llama.cpp stores `w + 1` so that its norm is the
    /// plain `x * w` (`Gemma3Model.norm_shift`).
    AddOne,
}

/// The GGUF name of `hf` and its transform, or None for a tensor llama.cpp drops (rotary
/// caches, a tied or Gemma's lm_head).
pub fn map(family: Family, hf: &str, n_head: usize, n_kv: usize) -> Option<(String, Transform)> {
    // Multimodal Gemma 3 checkpoints put the text model under language_model.
    let name = hf.strip_prefix("language_model.").unwrap_or(hf);
    // Idefics3 / SmolVLM put theirs under model.text_model.
    let stripped;
    let name = match name.strip_prefix("model.text_model.") {
        Some(rest) => {
            stripped = format!("model.{rest}");
            stripped.as_str()
        }
        None => name,
    };
    let fixed = match name {
        "model.embed_tokens.weight" => Some("token_embd.weight"),
        "model.norm.weight" => Some("output_norm.weight"),
        // Gemma ties its output to the embedding; llama.cpp ignores a stored copy.
        "lm_head.weight" if family == Family::Gemma3 => return None,
        "lm_head.weight" => Some("output.weight"),
        _ => None,
    };
    if let Some(f) = fixed {
        let t = if family == Family::Gemma3 && f.ends_with("norm.weight") {
            Transform::AddOne
        } else {
            Transform::None
        };
        return Some((f.to_string(), t));
    }
    let rest = name.strip_prefix("model.layers.")?;
    let (layer, part) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, kind) = part.rsplit_once('.')?;
    if !matches!(kind, "weight" | "bias") {
        return None;
    }
    let gguf = match (family, module) {
        (_, "input_layernorm") => "attn_norm",
        (_, "self_attn.q_proj") => "attn_q",
        (_, "self_attn.k_proj") => "attn_k",
        (_, "self_attn.v_proj") => "attn_v",
        (_, "self_attn.o_proj") => "attn_output",
        (_, "mlp.gate_proj") => "ffn_gate",
        (_, "mlp.up_proj") => "ffn_up",
        (_, "mlp.down_proj") => "ffn_down",
        (Family::Gemma3, "post_attention_layernorm") => "post_attention_norm",
        (Family::Gemma3, "pre_feedforward_layernorm") => "ffn_norm",
        (Family::Gemma3, "post_feedforward_layernorm") => "post_ffw_norm",
        (Family::Gemma3, "self_attn.q_norm") => "attn_q_norm",
        (Family::Gemma3, "self_attn.k_norm") => "attn_k_norm",
        (_, "post_attention_layernorm") => "ffn_norm",
        _ => return None,
    };
    let out = format!("blk.{layer}.{gguf}.{kind}");
    let t = match (family, gguf, kind) {
        (Family::Llama, "attn_q", "weight") => Transform::PermuteRope(n_head),
        (Family::Llama, "attn_k", "weight") => Transform::PermuteRope(n_kv),
        (Family::Gemma3, g, "weight") if g.ends_with("norm") => Transform::AddOne,
        _ => Transform::None,
    };
    Some((out, t))
}

/// Reorders the rows of a `[rows, row_bytes]` q/k weight as llama.cpp's `permute` does: within
/// each of `heads` heads, row `j * half + i` (j in 0..2) moves to `2 * i + j`.
pub fn permute_rows(data: &[u8], rows: usize, heads: usize) -> Option<Vec<u8>> {
    if heads == 0
        || rows == 0
        || !rows.is_multiple_of(2 * heads)
        || !data.len().is_multiple_of(rows)
    {
        return None;
    }
    let row_bytes = data.len() / rows;
    let per_head = rows / heads;
    let half = per_head / 2;
    let mut out = vec![0u8; data.len()];
    for h in 0..heads {
        for j in 0..2 {
            for i in 0..half {
                let from = h * per_head + j * half + i;
                let to = h * per_head + 2 * i + j;
                out[to * row_bytes..(to + 1) * row_bytes]
                    .copy_from_slice(&data[from * row_bytes..(from + 1) * row_bytes]);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_llama_cpp() {
        let l = |n| map(Family::Llama, n, 9, 3);
        assert_eq!(
            l("model.layers.2.self_attn.k_proj.weight"),
            Some(("blk.2.attn_k.weight".into(), Transform::PermuteRope(3)))
        );
        assert_eq!(
            l("model.layers.0.post_attention_layernorm.weight"),
            Some(("blk.0.ffn_norm.weight".into(), Transform::None))
        );
        assert_eq!(l("model.layers.0.self_attn.rotary_emb.inv_freq"), None);
        let q = |n| map(Family::Qwen2, n, 14, 2);
        assert_eq!(
            q("model.layers.1.self_attn.q_proj.bias"),
            Some(("blk.1.attn_q.bias".into(), Transform::None))
        );
        assert_eq!(
            q("lm_head.weight"),
            Some(("output.weight".into(), Transform::None))
        );
        let g = |n| map(Family::Gemma3, n, 4, 1);
        assert_eq!(
            g("model.layers.3.post_feedforward_layernorm.weight"),
            Some(("blk.3.post_ffw_norm.weight".into(), Transform::AddOne))
        );
        assert_eq!(
            g("model.norm.weight"),
            Some(("output_norm.weight".into(), Transform::AddOne))
        );
        assert_eq!(g("lm_head.weight"), None);
    }

    #[test]
    fn permutation_interleaves_halves() {
        // One head of 4 rows of one byte: rows [a0 a1 b0 b1] become [a0 b0 a1 b1].
        assert_eq!(permute_rows(&[0, 1, 2, 3], 4, 1), Some(vec![0, 2, 1, 3]));
        assert_eq!(
            permute_rows(&[0, 1, 2, 3, 4, 5, 6, 7], 8, 2),
            Some(vec![0, 2, 1, 3, 4, 6, 5, 7])
        );
        assert_eq!(permute_rows(&[0, 1, 2], 3, 1), None);
    }
}
