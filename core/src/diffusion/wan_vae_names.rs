//! Wan 2.1 VAE tensor names: diffusers' (`AutoencoderKLWan`, a pipeline's `vae/` folder) to
//! Wan's own (`Wan2.1_VAE.pth`), which ComfyUI's `wan_2.1_vae.safetensors` and
//! stable-diffusion.cpp's `wan_vae.hpp` use. Learned from diffusers' converters
//! (`convert_wan_vae_to_diffusers`, the other direction) and sd.cpp's block names.
//!
//! Wan's names are flat where diffusers nests: a residual block is `residual.{0,2,3,6}` (RMS
//! norm, conv, RMS norm, conv; the SiLU / dropout slots between carry no weights) and
//! `shortcut`; the encoder's `downsamples.K` is diffusers' flat `down_blocks.K`; the
//! decoder's `upsamples.K` numbers the residual blocks and the resampler of every up block
//! in one sequence, `num_res_blocks + 2` per block (`num_res_blocks + 1` residual blocks,
//! then the resampler, which the last block lacks); the mid block is `middle.0/1/2`
//! (residual, attention, residual); `conv_in` / `norm_out` / `conv_out` are `conv1` /
//! `head.0` / `head.2`; `quant_conv` / `post_quant_conv` are the top-level `conv1` / `conv2`.

/// A residual block's parameter, diffusers to Wan.
fn residual(part: &str) -> Option<String> {
    let (module, param) = part.rsplit_once('.')?;
    let wan = match (module, param) {
        ("norm1", "gamma") => "residual.0",
        ("conv1", "weight" | "bias") => "residual.2",
        ("norm2", "gamma") => "residual.3",
        ("conv2", "weight" | "bias") => "residual.6",
        ("conv_shortcut", "weight" | "bias") => "shortcut",
        _ => return None,
    };
    Some(format!("{wan}.{param}"))
}

/// A resampler's parameter (the same under both names).
fn resample(part: &str) -> Option<String> {
    matches!(
        part,
        "resample.1.weight" | "resample.1.bias" | "time_conv.weight" | "time_conv.bias"
    )
    .then(|| part.to_string())
}

fn mid_block(part: &str) -> Option<String> {
    if let Some(p) = part.strip_prefix("resnets.0.") {
        return Some(format!("middle.0.{}", residual(p)?));
    }
    if let Some(p) = part.strip_prefix("resnets.1.") {
        return Some(format!("middle.2.{}", residual(p)?));
    }
    let p = part.strip_prefix("attentions.0.")?;
    matches!(
        p,
        "norm.gamma" | "to_qkv.weight" | "to_qkv.bias" | "proj.weight" | "proj.bias"
    )
    .then(|| format!("middle.1.{p}"))
}

/// `conv_in`, `norm_out`, `conv_out` and the mid block, shared by encoder and decoder.
fn ends(part: &str) -> Option<String> {
    let (module, param) = part.split_once('.')?;
    let wan = match (module, param) {
        ("conv_in", "weight" | "bias") => "conv1",
        ("norm_out", "gamma") => "head.0",
        ("conv_out", "weight" | "bias") => "head.2",
        ("mid_block", rest) => return mid_block(rest),
        _ => return None,
    };
    Some(format!("{wan}.{param}"))
}

fn index_and_rest(s: &str) -> Option<(usize, &str)> {
    let (i, rest) = s.split_once('.')?;
    Some((i.parse().ok()?, rest))
}

/// The Wan-original name of a diffusers `AutoencoderKLWan` (Wan 2.1 layout) tensor, for a
/// model with `num_res_blocks` residual blocks per level; None for a name outside that
/// layout (Wan 2.2's residual VAE among them).
pub fn vae_wan_name(diffusers: &str, num_res_blocks: usize) -> Option<String> {
    match diffusers {
        "quant_conv.weight" => return Some("conv1.weight".into()),
        "quant_conv.bias" => return Some("conv1.bias".into()),
        "post_quant_conv.weight" => return Some("conv2.weight".into()),
        "post_quant_conv.bias" => return Some("conv2.bias".into()),
        _ => {}
    }
    if let Some(part) = diffusers.strip_prefix("encoder.") {
        if let Some(rest) = part.strip_prefix("down_blocks.") {
            let (k, p) = index_and_rest(rest)?;
            let p = residual(p).or_else(|| resample(p))?;
            return Some(format!("encoder.downsamples.{k}.{p}"));
        }
        return Some(format!("encoder.{}", ends(part)?));
    }
    let part = diffusers.strip_prefix("decoder.")?;
    let Some(rest) = part.strip_prefix("up_blocks.") else {
        return Some(format!("decoder.{}", ends(part)?));
    };
    let (block, rest) = index_and_rest(rest)?;
    let per_block = num_res_blocks + 2;
    if let Some(r) = rest.strip_prefix("resnets.") {
        let (j, p) = index_and_rest(r)?;
        if j > num_res_blocks {
            return None;
        }
        return Some(format!(
            "decoder.upsamples.{}.{}",
            block * per_block + j,
            residual(p)?
        ));
    }
    let p = resample(rest.strip_prefix("upsamplers.0.")?)?;
    Some(format!(
        "decoder.upsamples.{}.{p}",
        block * per_block + num_res_blocks + 1
    ))
}

/// A diffusers `AutoencoderKLWan` config.json's `num_res_blocks`, refusing by name what
/// these names do not cover (another class, Wan 2.2's residual VAE).
pub(super) fn vae_res_blocks(
    config_path: &std::path::Path,
) -> Result<usize, super::files::ModelFileError> {
    let c = super::files::read_config(config_path)?;
    let bad = |message: String| super::files::ModelFileError::Config {
        path: config_path.display().to_string(),
        message,
    };
    let class = c["_class_name"].as_str().unwrap_or("");
    if class != "AutoencoderKLWan" {
        return Err(bad(format!(
            "_class_name {class:?} is not AutoencoderKLWan"
        )));
    }
    if c["is_residual"].as_bool() == Some(true) {
        return Err(bad(
            "is_residual: the Wan 2.2 VAE is not supported (only Wan 2.1's)".into(),
        ));
    }
    Ok(c["num_res_blocks"].as_u64().unwrap_or(2) as usize)
}

/// A Wan 2.1 VAE as a `ModelFile` under Wan's own names, memory-mapped, no copy: either a
/// diffusers `vae/` folder (renamed) or a safetensors file already in Wan's names (ComfyUI's
/// `wan_2.1_vae.safetensors`, the `-vae.safetensors` of `weft convert`).
pub fn open_vae(
    path: &std::path::Path,
) -> Result<crate::gguf::ModelFile, super::files::ModelFileError> {
    use super::files::ModelFileError;
    let name = vec![(
        "general.name".to_string(),
        crate::gguf::Value::String("wan 2.1 vae".into()),
    )];
    let weights_err = |p: &std::path::Path, message: String| ModelFileError::Weights {
        path: p.display().to_string(),
        message,
    };
    if path.is_dir() {
        let res = vae_res_blocks(&path.join("config.json"))?;
        let file = super::wan_names::single_weights_file(path, "diffusion_pytorch_model")?;
        let mut unknown = None;
        let view = crate::hf::map_renamed(
            &file,
            &mut |n| {
                let w = vae_wan_name(n, res);
                if w.is_none() {
                    unknown.get_or_insert_with(|| n.to_string());
                }
                w
            },
            name,
        )
        .map_err(|e| weights_err(&file, e.to_string()))?;
        if let Some(n) = unknown {
            return Err(weights_err(
                &file,
                format!("tensor {n} is not part of a Wan 2.1 VAE"),
            ));
        }
        return Ok(view);
    }
    let view = crate::hf::map_renamed(path, &mut |n| Some(n.to_string()), name)
        .map_err(|e| weights_err(path, e.to_string()))?;
    for needed in [
        "decoder.middle.0.residual.0.gamma",
        "decoder.head.2.weight",
        "conv2.weight",
    ] {
        if view.gguf.tensor(needed).is_none() {
            return Err(weights_err(
                path,
                format!("tensor {needed} is missing: not a Wan 2.1 VAE in Wan's names"),
            ));
        }
    }
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::vae_wan_name;

    #[test]
    fn names_follow_wan_with_two_res_blocks() {
        // The released Wan 2.1 VAE (num_res_blocks 2), pairs as diffusers' converter lists them.
        let cases = [
            ("quant_conv.weight", "conv1.weight"),
            ("post_quant_conv.bias", "conv2.bias"),
            ("encoder.conv_in.weight", "encoder.conv1.weight"),
            ("decoder.norm_out.gamma", "decoder.head.0.gamma"),
            ("encoder.conv_out.bias", "encoder.head.2.bias"),
            (
                "encoder.mid_block.resnets.1.conv2.weight",
                "encoder.middle.2.residual.6.weight",
            ),
            (
                "decoder.mid_block.attentions.0.to_qkv.bias",
                "decoder.middle.1.to_qkv.bias",
            ),
            (
                "encoder.down_blocks.2.conv_shortcut.weight",
                "encoder.downsamples.2.shortcut.weight",
            ),
            (
                "encoder.down_blocks.5.time_conv.bias",
                "encoder.downsamples.5.time_conv.bias",
            ),
            (
                "decoder.up_blocks.0.resnets.2.norm2.gamma",
                "decoder.upsamples.2.residual.3.gamma",
            ),
            (
                "decoder.up_blocks.0.upsamplers.0.resample.1.weight",
                "decoder.upsamples.3.resample.1.weight",
            ),
            (
                "decoder.up_blocks.1.resnets.0.conv_shortcut.bias",
                "decoder.upsamples.4.shortcut.bias",
            ),
            (
                "decoder.up_blocks.2.upsamplers.0.time_conv.weight",
                "decoder.upsamples.11.time_conv.weight",
            ),
            (
                "decoder.up_blocks.3.resnets.2.conv1.weight",
                "decoder.upsamples.14.residual.2.weight",
            ),
        ];
        for (d, w) in cases {
            assert_eq!(vae_wan_name(d, 2).as_deref(), Some(w), "{d}");
        }
        for d in [
            "decoder.up_blocks.0.resnets.3.conv1.weight",
            "encoder.down_blocks.0.resnets.0.conv1.weight", // Wan 2.2's nested layout
            "decoder.up_blocks.0.avg_shortcut.weight",
            "encoder.mid_block.attentions.0.norm.weight",
            "clip.weight",
        ] {
            assert_eq!(vae_wan_name(d, 2), None, "{d}");
        }
    }
}
