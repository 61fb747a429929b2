//! UMT5 encoder tensor names: Hugging Face's (`UMT5EncoderModel`, a pipeline's
//! `text_encoder/` folder) to llama.cpp's `t5encoder` GGUF layout, which city96's
//! umt5-xxl-encoder-gguf files, ComfyUI-GGUF (its T5 map) and stable-diffusion.cpp read.
//! Learned from gguf-py's `constants.py` / `tensor_mapping.py` (T5ENCODER). UMT5 differs from
//! T5 only in having a relative-attention bias in every layer, so `attn_rel_b` appears in
//! every block rather than block 0 alone.

/// The llama.cpp GGUF architecture of a T5 / UMT5 encoder.
pub const ARCH: &str = "t5encoder";

/// The GGUF name of a UMT5 encoder tensor; None for tensors the encoder does not use (a
/// decoder's, `lm_head`).
pub fn umt5_gguf_name(hf: &str) -> Option<String> {
    match hf {
        // The token embedding is saved under any of the three (tied) names.
        "shared.weight" | "encoder.embed_tokens.weight" => return Some("token_embd.weight".into()),
        "encoder.final_layer_norm.weight" => return Some("enc.output_norm.weight".into()),
        _ => {}
    }
    let rest = hf.strip_prefix("encoder.block.")?;
    let (n, part) = rest.split_once('.')?;
    let n: usize = n.parse().ok()?;
    let gguf = match part {
        "layer.0.SelfAttention.q.weight" => "attn_q",
        "layer.0.SelfAttention.k.weight" => "attn_k",
        "layer.0.SelfAttention.v.weight" => "attn_v",
        "layer.0.SelfAttention.o.weight" => "attn_o",
        "layer.0.SelfAttention.relative_attention_bias.weight" => "attn_rel_b",
        "layer.0.layer_norm.weight" => "attn_norm",
        "layer.1.DenseReluDense.wi_0.weight" => "ffn_gate",
        "layer.1.DenseReluDense.wi_1.weight" => "ffn_up",
        "layer.1.DenseReluDense.wo.weight" => "ffn_down",
        "layer.1.layer_norm.weight" => "ffn_norm",
        _ => return None,
    };
    Some(format!("enc.blk.{n}.{gguf}.weight"))
}

/// A transformers `UMT5EncoderModel` folder (config.json + model.safetensors) as a
/// `ModelFile` under llama.cpp's `t5encoder` names and keys, memory-mapped, no copy: what
/// `weft convert` would write, minus the tokenizer and in the stored types.
pub fn open_diffusers_umt5(
    dir: &std::path::Path,
) -> Result<crate::gguf::ModelFile, super::files::ModelFileError> {
    use super::files::ModelFileError;
    let metadata = super::wan_convert::umt5_metadata(&dir.join("config.json"), "umt5")?;
    let path = super::wan_names::single_weights_file(dir, "model")?;
    let mut unknown = None;
    let file = crate::hf::map_renamed(
        &path,
        &mut |n| {
            let g = umt5_gguf_name(n);
            if g.is_none() && !n.starts_with("decoder.") && n != "lm_head.weight" {
                unknown.get_or_insert_with(|| n.to_string());
            }
            g
        },
        metadata,
    )
    .map_err(|e| ModelFileError::Weights {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    if let Some(n) = unknown {
        return Err(ModelFileError::Weights {
            path: path.display().to_string(),
            message: format!("tensor {n} is not part of a UMT5 encoder"),
        });
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::umt5_gguf_name;

    #[test]
    fn names_follow_llama_cpp_t5encoder() {
        let cases = [
            ("shared.weight", Some("token_embd.weight")),
            ("encoder.embed_tokens.weight", Some("token_embd.weight")),
            (
                "encoder.final_layer_norm.weight",
                Some("enc.output_norm.weight"),
            ),
            (
                "encoder.block.3.layer.0.SelfAttention.relative_attention_bias.weight",
                Some("enc.blk.3.attn_rel_b.weight"),
            ),
            (
                "encoder.block.0.layer.0.SelfAttention.o.weight",
                Some("enc.blk.0.attn_o.weight"),
            ),
            (
                "encoder.block.1.layer.1.DenseReluDense.wi_0.weight",
                Some("enc.blk.1.ffn_gate.weight"),
            ),
            (
                "encoder.block.1.layer.1.DenseReluDense.wi_1.weight",
                Some("enc.blk.1.ffn_up.weight"),
            ),
            (
                "encoder.block.1.layer.1.layer_norm.weight",
                Some("enc.blk.1.ffn_norm.weight"),
            ),
            ("decoder.block.0.layer.0.SelfAttention.q.weight", None),
            ("lm_head.weight", None),
        ];
        for (hf, want) in cases {
            assert_eq!(umt5_gguf_name(hf).as_deref(), want, "{hf}");
        }
    }
}
