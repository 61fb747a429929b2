//! Wan 2.1's VAE from a safetensors file in Wan's own names (`weft convert`'s
//! `<stem>-vae.safetensors`, ComfyUI's `wan_2.1_vae.safetensors`): such a file has no
//! config.json, so the config is read off the tensor shapes, and the weights go through the
//! name map of [`super::wan_vae_names`] into the folder loader's reader.
//!
//! What the shapes give: `z_dim` (post_quant_conv, Wan's top-level `conv2`), `base_dim` and
//! the input channels (the encoder's first conv), the residual blocks per level and the levels
//! (the encoder's `downsamples.K`: `num_res_blocks` residual blocks per level, then a resampler
//! on every level but the last), `dim_mult` (each level's residual output channels over
//! `base_dim`), `temperal_downsample` (a resampler with a `time_conv`), the decoder's base width
//! and output channels. What they cannot give: `latents_mean` / `latents_std`, the per-channel
//! statistics the pipelines scale latents by. They are constants of the trained Wan 2.1 VAE
//! (its `vae.py`, and the defaults of diffusers' `AutoencoderKLWan` config), so a file with
//! Wan 2.1's 16 latent channels gets them; any other `z_dim` is refused.

use std::path::Path;

use super::files::{ModelFileError, Weights};
use super::wan_vae::{WanVae, WanVaeConfig};
use super::wan_vae_names::{open_vae, vae_wan_name};
use crate::gguf::ModelFile;

/// Wan 2.1 VAE's latent channel means.
pub const WAN21_LATENTS_MEAN: [f32; 16] = [
    -0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508, 0.4134, -0.0715, 0.5517,
    -0.3632, -0.1922, -0.9497, 0.2503, -0.2921,
];

/// Wan 2.1 VAE's latent channel standard deviations.
pub const WAN21_LATENTS_STD: [f32; 16] = [
    2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743, 3.2687, 2.1526, 2.8652, 1.5579,
    1.6382, 1.1253, 2.8251, 1.916,
];

/// The config of a Wan-named VAE file, from its tensor shapes (see the module docs).
pub fn config_from_shapes(file: &ModelFile, path: &Path) -> Result<WanVaeConfig, ModelFileError> {
    let bad = |message: String| ModelFileError::Config {
        path: path.display().to_string(),
        message,
    };
    // PyTorch-order shape of a tensor, if present.
    let shape = |name: &str| -> Option<Vec<usize>> {
        let t = file.gguf.tensor(name)?;
        Some(t.dims.iter().rev().map(|&d| d as usize).collect())
    };
    let need = |name: &str| shape(name).ok_or_else(|| bad(format!("tensor {name} is missing")));
    let z_dim = need("conv2.weight")?[0];
    let first = need("encoder.conv1.weight")?;
    let (base_dim, in_channels) = (first[0], first[1]);
    let has = |name: String| file.gguf.tensor(&name).is_some();
    let count = (0..)
        .take_while(|k| {
            has(format!("encoder.downsamples.{k}.residual.0.gamma"))
                || has(format!("encoder.downsamples.{k}.resample.1.weight"))
        })
        .count();
    let resamplers: Vec<usize> = (0..count)
        .filter(|k| has(format!("encoder.downsamples.{k}.resample.1.weight")))
        .collect();
    let levels = resamplers.len() + 1;
    let num_res_blocks = resamplers.first().copied().unwrap_or(0);
    if levels < 2 || num_res_blocks == 0 || count != levels * num_res_blocks + levels - 1 {
        return Err(bad(format!(
            "encoder.downsamples has {count} entries with resamplers at {resamplers:?}: not \
             a Wan 2.1 VAE encoder"
        )));
    }
    let per_level = num_res_blocks + 1;
    let mut dim_mult = Vec::with_capacity(levels);
    for i in 0..levels {
        let out = need(&format!(
            "encoder.downsamples.{}.residual.2.weight",
            i * per_level
        ))?[0];
        if out % base_dim != 0 {
            return Err(bad(format!(
                "level {i} has {out} channels, not a multiple of base_dim {base_dim}"
            )));
        }
        dim_mult.push(out / base_dim);
    }
    let temperal_downsample = (0..levels - 1)
        .map(|i| {
            has(format!(
                "encoder.downsamples.{}.time_conv.weight",
                i * per_level + num_res_blocks
            ))
        })
        .collect();
    let decoder_in = need("decoder.conv1.weight")?[0];
    let top = dim_mult[levels - 1];
    if decoder_in % top != 0 {
        return Err(bad(format!(
            "decoder.conv1 has {decoder_in} channels, not a multiple of dim_mult {top}"
        )));
    }
    if z_dim != WAN21_LATENTS_MEAN.len() {
        return Err(bad(format!(
            "z_dim {z_dim}: a Wan-named VAE file carries no latents_mean / latents_std, and \
             only Wan 2.1's (16 channels) are known"
        )));
    }
    Ok(WanVaeConfig {
        base_dim,
        decoder_base_dim: decoder_in / top,
        z_dim,
        dim_mult,
        num_res_blocks,
        temperal_downsample,
        in_channels,
        out_channels: need("decoder.head.2.weight")?[0],
        latents_mean: WAN21_LATENTS_MEAN.to_vec(),
        latents_std: WAN21_LATENTS_STD.to_vec(),
    })
}

impl WanVae {
    /// Loads a Wan 2.1 VAE from a diffusers `vae/` folder ([`WanVae::load`]) or a
    /// safetensors file in Wan's names (the config from its shapes).
    pub fn load_file(path: &Path) -> Result<Self, ModelFileError> {
        if path.is_dir() {
            return Self::load(path);
        }
        let file = open_vae(path)?;
        let config = config_from_shapes(&file, path)?;
        let res = config.num_res_blocks;
        let rename = move |d: &str| vae_wan_name(d, res);
        Self::from_weights(config, &Weights::renamed(&file, path, &rename))
    }
}
