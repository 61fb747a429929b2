//! Wan 2.1's video VAE (`AutoencoderKLWan` in diffusers), loaded from a diffusers `vae/`
//! folder (config.json + diffusion_pytorch_model.safetensors) or a Wan-named safetensors file
//! (`wan_vae_file`) and run in f32 on the CPU.
//!
//! Plain loops like [`super::umt5`]: the graph has no 3-D convolution op yet, and this is the
//! reference the graph version will be held to. `decode` gives what diffusers' `vae.decode`
//! gives (its frame-by-frame causal cache included, see [`super::wan_vae_blocks`]), `encode`
//! the encoder's mean as `WanImageToVideoPipeline` uses it (`sample_mode="argmax"`).
//! The pipeline's scalings around the VAE are [`WanVae::denormalize`] (before decoding),
//! [`WanVae::normalize`] (after encoding a condition) and [`frames_to_u8`].

use std::path::Path;

use super::files::{read_config, ModelFileError, WeightFile, Weights};

use super::wan_vae_blocks::{
    downsample2d, rms_norm, silu, time_downsample, time_upsample, upsample2d, Attention, Clip,
    Conv, Geometry, MidBlock, ResBlock,
};

/// What can go wrong loading or running it (the error of every diffusion component).
pub type WanVaeError = ModelFileError;

/// The settings of a Wan 2.1 VAE config.json this implementation follows.
#[derive(Debug, Clone, PartialEq)]
pub struct WanVaeConfig {
    pub base_dim: usize,
    pub decoder_base_dim: usize,
    pub z_dim: usize,
    pub dim_mult: Vec<usize>,
    pub num_res_blocks: usize,
    pub temperal_downsample: Vec<bool>,
    pub in_channels: usize,
    pub out_channels: usize,
    pub latents_mean: Vec<f32>,
    pub latents_std: Vec<f32>,
}

impl WanVaeConfig {
    /// Reads diffusers' `AutoencoderKLWan` config.json; the Wan 2.2 variants (`is_residual`,
    /// `patch_size`) and attention in the down / up blocks (`attn_scales`) are refused.
    pub fn from_json(path: &Path) -> Result<Self, WanVaeError> {
        let bad = |message: String| WanVaeError::Config {
            path: path.display().to_string(),
            message,
        };
        let v = read_config(path)?;
        if let Some(class) = v["_class_name"].as_str() {
            if class != "AutoencoderKLWan" {
                return Err(bad(format!(
                    "_class_name {class:?} is not AutoencoderKLWan"
                )));
            }
        }
        let int = |key: &str, default: usize| -> Result<usize, WanVaeError> {
            match &v[key] {
                serde_json::Value::Null => Ok(default),
                x => x
                    .as_u64()
                    .filter(|&n| n > 0)
                    .map(|n| n as usize)
                    .ok_or_else(|| bad(format!("{key} must be a positive integer"))),
            }
        };
        if v["is_residual"].as_bool().unwrap_or(false) {
            return Err(bad(
                "is_residual true (the Wan 2.2 VAE's residual up / down blocks) is not supported"
                    .into(),
            ));
        }
        if !v["patch_size"].is_null() {
            return Err(bad(format!(
                "patch_size {} (the Wan 2.2 VAE's patchify) is not supported",
                v["patch_size"]
            )));
        }
        if v["attn_scales"].as_array().is_some_and(|a| !a.is_empty()) {
            return Err(bad(format!(
                "attn_scales {} (attention in the down / up blocks) is not supported",
                v["attn_scales"]
            )));
        }
        let floats = |key: &str| -> Result<Vec<f32>, WanVaeError> {
            v[key]
                .as_array()
                .and_then(|a| a.iter().map(|x| x.as_f64().map(|f| f as f32)).collect())
                .ok_or_else(|| bad(format!("{key} must be a list of numbers")))
        };
        let base_dim = int("base_dim", 96)?;
        let z_dim = int("z_dim", 16)?;
        let dim_mult: Vec<usize> = match v["dim_mult"].as_array() {
            Some(a) => a
                .iter()
                .map(|x| x.as_u64().filter(|&n| n > 0).map(|n| n as usize))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("dim_mult must be positive integers".into()))?,
            None => vec![1, 2, 4, 4],
        };
        let temperal_downsample: Vec<bool> = match v["temperal_downsample"].as_array() {
            Some(a) => a
                .iter()
                .map(|x| x.as_bool())
                .collect::<Option<_>>()
                .ok_or_else(|| bad("temperal_downsample must be booleans".into()))?,
            None => vec![false, true, true],
        };
        if dim_mult.len() < 2 || temperal_downsample.len() != dim_mult.len() - 1 {
            return Err(bad(format!(
                "dim_mult has {} entries and temperal_downsample {}: it needs one fewer",
                dim_mult.len(),
                temperal_downsample.len()
            )));
        }
        let (latents_mean, latents_std) = (floats("latents_mean")?, floats("latents_std")?);
        if latents_mean.len() != z_dim || latents_std.len() != z_dim {
            return Err(bad(format!(
                "latents_mean / latents_std have {} / {} values for z_dim {z_dim}",
                latents_mean.len(),
                latents_std.len()
            )));
        }
        Ok(WanVaeConfig {
            base_dim,
            decoder_base_dim: int("decoder_base_dim", base_dim)?,
            z_dim,
            dim_mult,
            num_res_blocks: int("num_res_blocks", 2)?,
            temperal_downsample,
            in_channels: int("in_channels", 3)?,
            out_channels: int("out_channels", 3)?,
            latents_mean,
            latents_std,
        })
    }

    /// Frames per latent frame after the first (2 per temporal resampling stage).
    pub fn temporal_factor(&self) -> usize {
        1 << self.temperal_downsample.iter().filter(|&&d| d).count()
    }

    /// Pixels per latent pixel, each way.
    pub fn spatial_factor(&self) -> usize {
        1 << (self.dim_mult.len() - 1)
    }
}

/// One stage of the encoder's `down_blocks` or the decoder's `up_blocks`.
enum Stage {
    Res(ResBlock),
    Down2d(Conv),
    /// The spatial convolution, then the time convolution.
    Down3d(Conv, Conv),
    Up2d(Conv),
    /// The time convolution, then the spatial one.
    Up3d(Conv, Conv),
}

impl Stage {
    fn forward(&self, x: &Clip) -> Clip {
        match self {
            Stage::Res(r) => r.forward(x),
            Stage::Down2d(conv) => downsample2d(x, conv),
            Stage::Down3d(conv, time) => time_downsample(&downsample2d(x, conv), time),
            Stage::Up2d(conv) => upsample2d(x, conv),
            Stage::Up3d(time, conv) => upsample2d(&time_upsample(x, time), conv),
        }
    }
}

/// The encoder's or decoder's stack: conv_in, stages, mid block, RMS norm, SiLU, conv_out.
/// (The encoder runs its mid block after the stages, the decoder before.)
struct Stack {
    conv_in: Conv,
    mid: MidBlock,
    stages: Vec<Stage>,
    norm_out: Vec<f32>,
    conv_out: Conv,
}

impl Stack {
    fn head(&self, x: &Clip) -> Clip {
        let mut x = rms_norm(x, &self.norm_out);
        silu(&mut x);
        self.conv_out.apply(&x, Geometry::causal(&self.conv_out, 1))
    }

    fn encode(&self, x: &Clip) -> Clip {
        let mut x = self.conv_in.apply(x, Geometry::causal(&self.conv_in, 1));
        for s in &self.stages {
            x = s.forward(&x);
        }
        self.head(&self.mid.forward(&x))
    }

    fn decode(&self, x: &Clip) -> Clip {
        let mut x = self
            .mid
            .forward(&self.conv_in.apply(x, Geometry::causal(&self.conv_in, 1)));
        for s in &self.stages {
            x = s.forward(&x);
        }
        self.head(&x)
    }
}

/// A loaded Wan 2.1 VAE.
pub struct WanVae {
    pub config: WanVaeConfig,
    encoder: Stack,
    quant_conv: Conv,
    post_quant_conv: Conv,
    decoder: Stack,
}

impl Weights<'_> {
    /// A convolution `out × inp` with kernel `k` (`[kh, kw]` for a 2-D one).
    fn conv(&self, name: &str, out: usize, inp: usize, k: &[usize]) -> Result<Conv, WanVaeError> {
        let mut shape = vec![out, inp];
        shape.extend_from_slice(k);
        let kernel = if k.len() == 2 {
            [1, k[0], k[1]]
        } else {
            [k[0], k[1], k[2]]
        };
        Ok(Conv {
            out,
            inp,
            k: kernel,
            weight: self.get(&format!("{name}.weight"), &shape)?,
            bias: self.get(&format!("{name}.bias"), &[out])?,
        })
    }

    fn gamma(&self, name: &str, c: usize, image: bool) -> Result<Vec<f32>, WanVaeError> {
        let shape: &[usize] = if image { &[c, 1, 1] } else { &[c, 1, 1, 1] };
        self.get(&format!("{name}.gamma"), shape)
    }

    fn res(&self, name: &str, inp: usize, out: usize) -> Result<ResBlock, WanVaeError> {
        Ok(ResBlock {
            norm1: self.gamma(&format!("{name}.norm1"), inp, false)?,
            conv1: self.conv(&format!("{name}.conv1"), out, inp, &[3, 3, 3])?,
            norm2: self.gamma(&format!("{name}.norm2"), out, false)?,
            conv2: self.conv(&format!("{name}.conv2"), out, out, &[3, 3, 3])?,
            shortcut: if inp != out {
                Some(self.conv(&format!("{name}.conv_shortcut"), out, inp, &[1, 1, 1])?)
            } else {
                None
            },
        })
    }

    fn mid(&self, name: &str, c: usize) -> Result<MidBlock, WanVaeError> {
        let a = format!("{name}.attentions.0");
        Ok(MidBlock {
            res0: self.res(&format!("{name}.resnets.0"), c, c)?,
            attn: Attention {
                norm: self.gamma(&format!("{a}.norm"), c, true)?,
                to_qkv: self.conv(&format!("{a}.to_qkv"), 3 * c, c, &[1, 1])?,
                proj: self.conv(&format!("{a}.proj"), c, c, &[1, 1])?,
            },
            res1: self.res(&format!("{name}.resnets.1"), c, c)?,
        })
    }
}

fn encoder(w: &Weights, c: &WanVaeConfig) -> Result<Stack, WanVaeError> {
    let dims: Vec<usize> = std::iter::once(1)
        .chain(c.dim_mult.iter().copied())
        .map(|m| m * c.base_dim)
        .collect();
    let mut stages = Vec::new();
    let last = c.dim_mult.len() - 1;
    for i in 0..=last {
        let mut inp = dims[i];
        let out = dims[i + 1];
        for _ in 0..c.num_res_blocks {
            let name = format!("encoder.down_blocks.{}", stages.len());
            stages.push(Stage::Res(w.res(&name, inp, out)?));
            inp = out;
        }
        if i != last {
            let name = format!("encoder.down_blocks.{}", stages.len());
            let conv = w.conv(&format!("{name}.resample.1"), out, out, &[3, 3])?;
            stages.push(if c.temperal_downsample[i] {
                let time = w.conv(&format!("{name}.time_conv"), out, out, &[3, 1, 1])?;
                Stage::Down3d(conv, time)
            } else {
                Stage::Down2d(conv)
            });
        }
    }
    let top = dims[last + 1];
    Ok(Stack {
        conv_in: w.conv("encoder.conv_in", dims[0], c.in_channels, &[3, 3, 3])?,
        mid: w.mid("encoder.mid_block", top)?,
        stages,
        norm_out: w.gamma("encoder.norm_out", top, false)?,
        conv_out: w.conv("encoder.conv_out", 2 * c.z_dim, top, &[3, 3, 3])?,
    })
}

fn decoder(w: &Weights, c: &WanVaeConfig) -> Result<Stack, WanVaeError> {
    let n = c.dim_mult.len();
    let dims: Vec<usize> = std::iter::once(c.dim_mult[n - 1])
        .chain(c.dim_mult.iter().rev().copied())
        .map(|m| m * c.decoder_base_dim)
        .collect();
    let upsample: Vec<bool> = c.temperal_downsample.iter().rev().copied().collect();
    let mut stages = Vec::new();
    for i in 0..n {
        // After an upsampler (every stage but the first follows one) the channels are halved.
        let mut inp = if i > 0 { dims[i] / 2 } else { dims[i] };
        let out = dims[i + 1];
        let name = format!("decoder.up_blocks.{i}");
        for j in 0..=c.num_res_blocks {
            stages.push(Stage::Res(w.res(
                &format!("{name}.resnets.{j}"),
                inp,
                out,
            )?));
            inp = out;
        }
        if i != n - 1 {
            let u = format!("{name}.upsamplers.0");
            let conv = w.conv(&format!("{u}.resample.1"), out / 2, out, &[3, 3])?;
            stages.push(if upsample[i] {
                let time = w.conv(&format!("{u}.time_conv"), 2 * out, out, &[3, 1, 1])?;
                Stage::Up3d(time, conv)
            } else {
                Stage::Up2d(conv)
            });
        }
    }
    Ok(Stack {
        conv_in: w.conv("decoder.conv_in", dims[0], c.z_dim, &[3, 3, 3])?,
        mid: w.mid("decoder.mid_block", dims[0])?,
        stages,
        norm_out: w.gamma("decoder.norm_out", dims[n], false)?,
        conv_out: w.conv("decoder.conv_out", c.out_channels, dims[n], &[3, 3, 3])?,
    })
}

impl WanVae {
    /// Loads `dir` (a diffusers `vae/` folder).
    pub fn load(dir: &Path) -> Result<Self, WanVaeError> {
        let config = WanVaeConfig::from_json(&dir.join("config.json"))?;
        let path = dir.join("diffusion_pytorch_model.safetensors");
        let file = WeightFile::read(&path)?;
        Self::from_weights(config, &file.tensors()?)
    }

    /// The VAE from `w`'s tensors (asked for by diffusers' names), shaped by `config`: the
    /// one reader behind [`Self::load`] and the Wan-named file loader (`wan_vae_file`).
    pub(super) fn from_weights(config: WanVaeConfig, w: &Weights) -> Result<Self, WanVaeError> {
        let z = config.z_dim;
        Ok(WanVae {
            encoder: encoder(w, &config)?,
            quant_conv: w.conv("quant_conv", 2 * z, 2 * z, &[1, 1, 1])?,
            post_quant_conv: w.conv("post_quant_conv", z, z, &[1, 1, 1])?,
            decoder: decoder(w, &config)?,
            config,
        })
    }

    /// Decodes latents `[z_dim, t, h, w]` (already denormalised, see [`Self::denormalize`])
    /// into frames `[out_channels, 1 + 4(t - 1), 8h, 8w]` (for Wan's factors) clamped to
    /// [-1, 1].
    pub fn decode(&self, latents: &[f32], shape: [usize; 4]) -> Result<Clip, WanVaeError> {
        let [z, t, h, w] = shape;
        if z != self.config.z_dim || t == 0 || h == 0 || w == 0 {
            return Err(WanVaeError::Input(format!(
                "latents of shape {shape:?}: need [{}, frames, height, width], none of them 0",
                self.config.z_dim
            )));
        }
        if latents.len() != z * t * h * w {
            return Err(WanVaeError::Input(format!(
                "{} latent values for shape {shape:?}",
                latents.len()
            )));
        }
        let x = Clip {
            c: z,
            t,
            h,
            w,
            data: latents.to_vec(),
        };
        let x = self
            .post_quant_conv
            .apply(&x, Geometry::causal(&self.post_quant_conv, 0));
        let mut out = self.decoder.decode(&x);
        for v in out.data.iter_mut() {
            *v = v.clamp(-1.0, 1.0);
        }
        Ok(out)
    }

    /// Encodes frames `[in_channels, 1 + 4n, h, w]` (values in [-1, 1]; `h`, `w` multiples of
    /// 8 for Wan's factors) into the posterior's mean `[z_dim, 1 + n, h / 8, w / 8]`, what the
    /// image-to-video pipeline uses (`sample_mode="argmax"`).
    pub fn encode(&self, frames: &[f32], shape: [usize; 4]) -> Result<Clip, WanVaeError> {
        let [c, t, h, w] = shape;
        let (ft, fs) = (self.config.temporal_factor(), self.config.spatial_factor());
        if c != self.config.in_channels || t == 0 || (t - 1) % ft != 0 {
            return Err(WanVaeError::Input(format!(
                "frames of shape {shape:?}: need [{}, 1 + {ft}n frames, height, width]",
                self.config.in_channels
            )));
        }
        if h == 0 || w == 0 || h % fs != 0 || w % fs != 0 {
            return Err(WanVaeError::Input(format!(
                "frames of {h}x{w} pixels: height and width must be positive multiples of {fs}"
            )));
        }
        if frames.len() != c * t * h * w {
            return Err(WanVaeError::Input(format!(
                "{} frame values for shape {shape:?}",
                frames.len()
            )));
        }
        let x = Clip {
            c,
            t,
            h,
            w,
            data: frames.to_vec(),
        };
        let moments = self.quant_conv.apply(
            &self.encoder.encode(&x),
            Geometry::causal(&self.quant_conv, 0),
        );
        // The first z_dim channels are the mean, the rest the log-variance.
        let p = moments.t * moments.h * moments.w;
        Ok(Clip {
            c: self.config.z_dim,
            t: moments.t,
            h: moments.h,
            w: moments.w,
            data: moments.data[..self.config.z_dim * p].to_vec(),
        })
    }

    /// The pipeline's step from the denoiser's latents `[z_dim, ...]` to the decoder's input:
    /// `latents / (1 / std) + mean` per channel, in f32 as diffusers computes it.
    pub fn denormalize(&self, latents: &mut [f32]) {
        let per = latents.len() / self.config.z_dim;
        for (c, chunk) in latents.chunks_mut(per).enumerate() {
            let inv = 1.0f32 / self.config.latents_std[c];
            let mean = self.config.latents_mean[c];
            for v in chunk {
                *v = *v / inv + mean;
            }
        }
    }

    /// The image-to-video pipeline's scaling of an encoded condition `[z_dim, ...]`:
    /// `(mean - latents_mean) * (1 / std)` per channel.
    pub fn normalize(&self, latents: &mut [f32]) {
        let per = latents.len() / self.config.z_dim;
        for (c, chunk) in latents.chunks_mut(per).enumerate() {
            let inv = 1.0f32 / self.config.latents_std[c];
            let mean = self.config.latents_mean[c];
            for v in chunk {
                *v = (*v - mean) * inv;
            }
        }
    }
}

/// Decoded frames `[3, t, h, w]` in [-1, 1] to RGB bytes `[t, h, w, 3]` as the pipeline's
/// video post-processing does: `(x / 2 + 0.5)` clamped to [0, 1], times 255, rounded half to
/// even (numpy's `round`).
pub fn frames_to_u8(frames: &Clip) -> Vec<u8> {
    let (t, p) = (frames.t, frames.h * frames.w);
    let mut out = vec![0u8; t * p * frames.c];
    for c in 0..frames.c {
        for f in 0..t {
            let plane = &frames.data[(c * t + f) * p..(c * t + f + 1) * p];
            for (i, &v) in plane.iter().enumerate() {
                let x = (v / 2.0 + 0.5).clamp(0.0, 1.0) * 255.0;
                out[(f * p + i) * frames.c + c] = x.round_ties_even() as u8;
            }
        }
    }
    out
}
