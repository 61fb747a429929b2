//! Wan's diffusion transformer (`WanTransformer3DModel` in diffusers), loaded from a diffusers
//! `transformer/` folder (config.json + diffusion_pytorch_model.safetensors) and run in f32 on
//! the CPU, one latent video (batch 1) per call.
//!
//! Why plain f32 loops and not a backend graph yet: this is the exact reference the graph
//! version will be checked against, and it runs the tiny test models; the real 1.3B / 14B
//! models need the graph (3-D RoPE and per-token modulation ops) and bf16 weights used in
//! place.
//!
//! Facts followed (diffusers 0.37's transformer_wan.py, see tests/data/video/README.md):
//! patches (conv3d with kernel = stride) become tokens in frame, row, column order; the
//! timestep sinusoid goes through linear-SiLU-linear (`temb`), then SiLU-linear to the six
//! modulations (shift, scale, gate, c_shift, c_scale, c_gate) added to each block's
//! `scale_shift_table`; text rows go through linear-GELU(tanh)-linear and all of them,
//! padding included, are attended to; q / k get an RMS norm over all heads together before
//! the head split; the output norm is modulated by `scale_shift_table + temb`.

use std::path::Path;

use super::files::{read_config, ModelFileError, WeightFile, Weights};

use super::umt5::{add_in_place, gelu_tanh, linear, softmax_in_place};
use super::wan_rope::{timestep_sinusoid, Rope};

/// What can go wrong loading or running it (the error of every diffusion component).
pub type WanDitError = ModelFileError;

/// The hyper-parameters of the transformer, from the folder's config.json.
#[derive(Debug, Clone, PartialEq)]
pub struct WanDitConfig {
    /// Frames, rows, columns of one patch.
    pub patch_size: [usize; 3],
    pub num_heads: usize,
    pub head_dim: usize,
    pub in_channels: usize,
    pub out_channels: usize,
    pub text_dim: usize,
    pub freq_dim: usize,
    pub ffn_dim: usize,
    pub num_layers: usize,
    /// Whether `norm2` (before cross-attention) is an affine LayerNorm (else the identity).
    pub cross_attn_norm: bool,
    pub eps: f32,
    /// The largest position (frame, row or column of a token) the rotary tables cover.
    pub rope_max_seq_len: usize,
}

impl WanDitConfig {
    /// Reads a diffusers `WanTransformer3DModel` config.json; the Wan 2.1 I2V image
    /// cross-attention (`image_dim`, `added_kv_proj_dim`) is refused by name.
    pub fn from_json(path: &Path) -> Result<Self, WanDitError> {
        let bad = |message: String| WanDitError::Config {
            path: path.display().to_string(),
            message,
        };
        let v = read_config(path)?;
        if let Some(class) = v["_class_name"].as_str() {
            if class != "WanTransformer3DModel" {
                return Err(bad(format!(
                    "_class_name {class:?} is not WanTransformer3DModel"
                )));
            }
        }
        let int = |key: &str| -> Result<usize, WanDitError> {
            v[key]
                .as_u64()
                .filter(|&n| n > 0)
                .map(|n| n as usize)
                .ok_or_else(|| bad(format!("{key} must be a positive integer")))
        };
        for key in ["image_dim", "added_kv_proj_dim", "pos_embed_seq_len"] {
            if !v[key].is_null() {
                return Err(bad(format!(
                    "{key} {} is not supported (the image cross-attention of Wan 2.1 I2V)",
                    v[key]
                )));
            }
        }
        let qk_norm = v["qk_norm"].as_str().unwrap_or("none");
        if qk_norm != "rms_norm_across_heads" {
            return Err(bad(format!(
                "qk_norm {qk_norm:?} is not supported (only rms_norm_across_heads)"
            )));
        }
        let patch: Vec<usize> = v["patch_size"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_u64()).map(|x| x as usize))
            .into_iter()
            .flatten()
            .filter(|&x| x > 0)
            .collect();
        let patch_size: [usize; 3] = patch
            .try_into()
            .map_err(|_| bad("patch_size must be three positive integers".into()))?;
        let head_dim = int("attention_head_dim")?;
        if head_dim % 2 != 0 {
            return Err(bad(format!(
                "attention_head_dim {head_dim} must be even (rotary pairs)"
            )));
        }
        let freq_dim = int("freq_dim")?;
        if freq_dim % 2 != 0 {
            return Err(bad(format!("freq_dim {freq_dim} must be even")));
        }
        let in_channels = int("in_channels")?;
        let out_channels = if v["out_channels"].is_null() {
            in_channels
        } else {
            int("out_channels")?
        };
        let eps = v["eps"].as_f64().unwrap_or(1e-6);
        let cross_attn_norm = v["cross_attn_norm"]
            .as_bool()
            .ok_or_else(|| bad("cross_attn_norm must be true or false".into()))?;
        let rope_max_seq_len = if v["rope_max_seq_len"].is_null() {
            1024
        } else {
            int("rope_max_seq_len")?
        };
        Ok(WanDitConfig {
            patch_size,
            num_heads: int("num_attention_heads")?,
            head_dim,
            in_channels,
            out_channels,
            text_dim: int("text_dim")?,
            freq_dim,
            ffn_dim: int("ffn_dim")?,
            num_layers: int("num_layers")?,
            cross_attn_norm,
            eps: eps as f32,
            rope_max_seq_len,
        })
    }

    /// The model width: heads x head_dim.
    pub fn dim(&self) -> usize {
        self.num_heads * self.head_dim
    }

    fn patch_volume(&self) -> usize {
        self.patch_size.iter().product()
    }
}

/// A linear layer with bias, `[out, in]` weight row-major as stored.
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    n_in: usize,
    n_out: usize,
}

impl Linear {
    fn apply(&self, x: &[f32]) -> Vec<f32> {
        let rows = x.len() / self.n_in;
        let mut out = linear(x, &self.weight, rows, self.n_in, self.n_out);
        for row in out.chunks_exact_mut(self.n_out) {
            add_in_place(row, &self.bias);
        }
        out
    }
}

/// One attention of a block: projections and the q / k RMS-norm weights.
struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    norm_q: Vec<f32>,
    norm_k: Vec<f32>,
}

struct Block {
    /// `[6, dim]`: shift, scale, gate, c_shift, c_scale, c_gate.
    modulation: Vec<f32>,
    self_attn: Attention,
    /// `norm2`'s weight and bias when `cross_attn_norm`.
    cross_norm: Option<(Vec<f32>, Vec<f32>)>,
    cross_attn: Attention,
    ffn_in: Linear,
    ffn_out: Linear,
}

/// A loaded Wan transformer.
pub struct WanDit {
    pub config: WanDitConfig,
    patch: Linear,
    time_1: Linear,
    time_2: Linear,
    time_proj: Linear,
    text_1: Linear,
    text_2: Linear,
    blocks: Vec<Block>,
    /// `[2, dim]`: shift, scale of the output norm.
    out_modulation: Vec<f32>,
    proj_out: Linear,
}

impl Weights<'_> {
    /// `name.weight` of shape `weight_shape` (its product over the rest is the input width)
    /// and `name.bias` of `n_out` values.
    fn linear_shaped(&self, name: &str, weight_shape: &[usize]) -> Result<Linear, WanDitError> {
        let n_out = weight_shape[0];
        let n_in = weight_shape[1..].iter().product();
        Ok(Linear {
            weight: self.get(&format!("{name}.weight"), weight_shape)?,
            bias: self.get(&format!("{name}.bias"), &[n_out])?,
            n_in,
            n_out,
        })
    }

    fn linear(&self, name: &str, n_in: usize, n_out: usize) -> Result<Linear, WanDitError> {
        self.linear_shaped(name, &[n_out, n_in])
    }

    fn attention(&self, name: &str, dim: usize) -> Result<Attention, WanDitError> {
        Ok(Attention {
            q: self.linear(&format!("{name}.to_q"), dim, dim)?,
            k: self.linear(&format!("{name}.to_k"), dim, dim)?,
            v: self.linear(&format!("{name}.to_v"), dim, dim)?,
            out: self.linear(&format!("{name}.to_out.0"), dim, dim)?,
            norm_q: self.get(&format!("{name}.norm_q.weight"), &[dim])?,
            norm_k: self.get(&format!("{name}.norm_k.weight"), &[dim])?,
        })
    }
}

impl WanDit {
    /// Loads `dir` (a diffusers `transformer/` folder: config.json and
    /// diffusion_pytorch_model.safetensors).
    pub fn load(dir: &Path) -> Result<Self, WanDitError> {
        let config = WanDitConfig::from_json(&dir.join("config.json"))?;
        let path = dir.join("diffusion_pytorch_model.safetensors");
        let file = WeightFile::read(&path)?;
        let w = file.tensors()?;
        let c = &config;
        let dim = c.dim();
        let [pt, ph, pw] = c.patch_size;
        let patch = w.linear_shaped("patch_embedding", &[dim, c.in_channels, pt, ph, pw])?;
        let ce = "condition_embedder";
        let time_1 = w.linear(&format!("{ce}.time_embedder.linear_1"), c.freq_dim, dim)?;
        let time_2 = w.linear(&format!("{ce}.time_embedder.linear_2"), dim, dim)?;
        let time_proj = w.linear(&format!("{ce}.time_proj"), dim, 6 * dim)?;
        let text_1 = w.linear(&format!("{ce}.text_embedder.linear_1"), c.text_dim, dim)?;
        let text_2 = w.linear(&format!("{ce}.text_embedder.linear_2"), dim, dim)?;
        let mut blocks = Vec::with_capacity(c.num_layers);
        for i in 0..c.num_layers {
            let b = format!("blocks.{i}");
            let cross_norm = if c.cross_attn_norm {
                Some((
                    w.get(&format!("{b}.norm2.weight"), &[dim])?,
                    w.get(&format!("{b}.norm2.bias"), &[dim])?,
                ))
            } else {
                None
            };
            blocks.push(Block {
                modulation: w.get(&format!("{b}.scale_shift_table"), &[1, 6, dim])?,
                self_attn: w.attention(&format!("{b}.attn1"), dim)?,
                cross_norm,
                cross_attn: w.attention(&format!("{b}.attn2"), dim)?,
                ffn_in: w.linear(&format!("{b}.ffn.net.0.proj"), dim, c.ffn_dim)?,
                ffn_out: w.linear(&format!("{b}.ffn.net.2"), c.ffn_dim, dim)?,
            });
        }
        let out_modulation = w.get("scale_shift_table", &[1, 2, dim])?;
        let proj_out = w.linear("proj_out", dim, c.out_channels * c.patch_volume())?;
        Ok(WanDit {
            config,
            patch,
            time_1,
            time_2,
            time_proj,
            text_1,
            text_2,
            blocks,
            out_modulation,
            proj_out,
        })
    }

    /// The model's prediction (the flow velocity), `[out_channels, frames, height, width]`,
    /// for `latents` `[in_channels, frames, height, width]` at `timestep`, conditioned on
    /// `text` (rows of `text_dim` values: the text encoder's output, padding rows included).
    pub fn forward(
        &self,
        latents: &[f32],
        [frames, height, width]: [usize; 3],
        timestep: f32,
        text: &[f32],
    ) -> Result<Vec<f32>, WanDitError> {
        let c = &self.config;
        let dim = c.dim();
        let [pt, ph, pw] = c.patch_size;
        let want = c.in_channels * frames * height * width;
        if want == 0 || latents.len() != want {
            return Err(WanDitError::Input(format!(
                "latents have {} values; {} channels x {frames} x {height} x {width} is {want}",
                latents.len(),
                c.in_channels
            )));
        }
        if !(frames.is_multiple_of(pt) && height.is_multiple_of(ph) && width.is_multiple_of(pw)) {
            return Err(WanDitError::Input(format!(
                "latent size {frames} x {height} x {width} is not a multiple of the patch \
                 {pt} x {ph} x {pw}"
            )));
        }
        let grid = [frames / pt, height / ph, width / pw];
        if let Some(&n) = grid.iter().find(|&&n| n > c.rope_max_seq_len) {
            return Err(WanDitError::Input(format!(
                "{n} patches along one axis is more than the rotary tables' {}",
                c.rope_max_seq_len
            )));
        }
        if text.is_empty() || !text.len().is_multiple_of(c.text_dim) {
            return Err(WanDitError::Input(format!(
                "text encoding has {} values, not a positive multiple of text_dim {}",
                text.len(),
                c.text_dim
            )));
        }
        if !timestep.is_finite() {
            return Err(WanDitError::Input(format!(
                "timestep {timestep} is not finite"
            )));
        }

        let mut x = self
            .patch
            .apply(&self.patchify(latents, [frames, height, width]));

        // Conditioning: temb for the output norm, its projection for the blocks.
        let mut h = self.time_1.apply(&timestep_sinusoid(timestep, c.freq_dim));
        h.iter_mut().for_each(|v| *v = silu(*v));
        let temb = self.time_2.apply(&h);
        let silu_temb: Vec<f32> = temb.iter().map(|&v| silu(v)).collect();
        let time_mod = self.time_proj.apply(&silu_temb);
        let mut ctx = self.text_1.apply(text);
        ctx.iter_mut().for_each(|v| *v = gelu_tanh(*v));
        let ctx = self.text_2.apply(&ctx);

        let rope = Rope::new(c.head_dim, grid);
        for block in &self.blocks {
            self.block(block, &mut x, &ctx, &time_mod, &rope);
        }

        // Output norm modulated by scale_shift_table + temb, then the patch projection.
        let m: Vec<f32> = self
            .out_modulation
            .iter()
            .enumerate()
            .map(|(i, &s)| s + temb[i % dim])
            .collect();
        let (shift, scale) = m.split_at(dim);
        let mut n = layer_norm(&x, dim, c.eps, None);
        modulate(&mut n, scale, shift);
        let y = self.proj_out.apply(&n);
        Ok(self.unpatchify(&y, grid))
    }

    /// Tokens of `in_channels * patch volume` values, in (frame, row, column) order, laid out
    /// as the conv3d weight's `[in, pt, ph, pw]`.
    fn patchify(&self, latents: &[f32], [t, h, w]: [usize; 3]) -> Vec<f32> {
        let c = &self.config;
        let [pt, ph, pw] = c.patch_size;
        let mut out = Vec::with_capacity(latents.len());
        for f in 0..t / pt {
            for r in 0..h / ph {
                for col in 0..w / pw {
                    for ch in 0..c.in_channels {
                        for a in 0..pt {
                            for y in 0..ph {
                                let base = ((ch * t + f * pt + a) * h + r * ph + y) * w;
                                let start = base + col * pw;
                                out.extend_from_slice(&latents[start..start + pw]);
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// `[out_channels, frames, height, width]` from tokens of `(pt, ph, pw, out_channels)`.
    fn unpatchify(&self, y: &[f32], grid: [usize; 3]) -> Vec<f32> {
        let c = &self.config;
        let [pt, ph, pw] = c.patch_size;
        let co = c.out_channels;
        let (t, h, w) = (grid[0] * pt, grid[1] * ph, grid[2] * pw);
        let mut out = vec![0f32; co * t * h * w];
        let row = co * pt * ph * pw;
        for (token, values) in y.chunks_exact(row).enumerate() {
            let f = token / (grid[1] * grid[2]);
            let r = token / grid[2] % grid[1];
            let col = token % grid[2];
            for (i, &v) in values.iter().enumerate() {
                let ch = i % co;
                let p = i / co;
                let (a, yy, xx) = (p / (ph * pw), p / pw % ph, p % pw);
                let idx = ((ch * t + f * pt + a) * h + r * ph + yy) * w + col * pw + xx;
                out[idx] = v;
            }
        }
        out
    }

    fn block(&self, b: &Block, x: &mut [f32], ctx: &[f32], time_mod: &[f32], rope: &Rope) {
        let c = &self.config;
        let dim = c.dim();
        let m: Vec<f32> = b
            .modulation
            .iter()
            .zip(time_mod)
            .map(|(s, t)| s + t)
            .collect();
        let part = |i: usize| &m[i * dim..(i + 1) * dim];
        let (shift, scale, gate) = (part(0), part(1), part(2));
        let (c_shift, c_scale, c_gate) = (part(3), part(4), part(5));

        let mut n = layer_norm(x, dim, c.eps, None);
        modulate(&mut n, scale, shift);
        let a = self.attention(&b.self_attn, &n, &n, Some(rope));
        add_gated(x, &a, gate);

        let n = match &b.cross_norm {
            Some((w, bias)) => layer_norm(x, dim, c.eps, Some((w, bias))),
            None => x.to_vec(),
        };
        let a = self.attention(&b.cross_attn, &n, ctx, None);
        add_in_place(x, &a);

        let mut n = layer_norm(x, dim, c.eps, None);
        modulate(&mut n, c_scale, c_shift);
        let mut f = b.ffn_in.apply(&n);
        f.iter_mut().for_each(|v| *v = gelu_tanh(*v));
        let f = b.ffn_out.apply(&f);
        add_gated(x, &f, c_gate);
    }

    /// Multi-head attention of the rows of `h` over the rows of `kv`: q / k RMS-normed over
    /// all heads, then rotated when `rope` is given; no mask.
    fn attention(&self, a: &Attention, h: &[f32], kv: &[f32], rope: Option<&Rope>) -> Vec<f32> {
        let c = &self.config;
        let (dim, hd) = (c.dim(), c.head_dim);
        let mut q = rms_norm(&a.q.apply(h), &a.norm_q, dim, c.eps);
        let mut k = rms_norm(&a.k.apply(kv), &a.norm_k, dim, c.eps);
        let v = a.v.apply(kv);
        if let Some(rope) = rope {
            rope.apply(&mut q);
            rope.apply(&mut k);
        }
        let (nq, nk) = (q.len() / dim, k.len() / dim);
        let scale = 1.0 / (hd as f32).sqrt();
        let mut out = vec![0f32; nq * dim];
        let mut scores = vec![0f32; nk];
        for head in 0..c.num_heads {
            let off = head * hd;
            for i in 0..nq {
                let qi = &q[i * dim + off..i * dim + off + hd];
                for (j, s) in scores.iter_mut().enumerate() {
                    let kj = &k[j * dim + off..j * dim + off + hd];
                    *s = qi.iter().zip(kj).fold(0f32, |acc, (a, b)| acc + a * b) * scale;
                }
                softmax_in_place(&mut scores);
                let o = &mut out[i * dim + off..i * dim + off + hd];
                for (j, &p) in scores.iter().enumerate() {
                    for (ov, &vv) in o.iter_mut().zip(&v[j * dim + off..j * dim + off + hd]) {
                        *ov += p * vv;
                    }
                }
            }
        }
        a.out.apply(&out)
    }
}

fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// LayerNorm over rows of `d` (biased variance), with an optional affine `(weight, bias)`.
fn layer_norm(x: &[f32], d: usize, eps: f32, affine: Option<(&[f32], &[f32])>) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
        let r = (1.0 / (var + eps as f64).sqrt()) as f32;
        let mean = mean as f32;
        match affine {
            Some((w, b)) => out.extend(
                row.iter()
                    .zip(w.iter().zip(b))
                    .map(|(&v, (&w, &b))| (v - mean) * r * w + b),
            ),
            None => out.extend(row.iter().map(|&v| (v - mean) * r)),
        }
    }
    out
}

/// torch's `RMSNorm`: `x / sqrt(mean(x^2) + eps) * weight`, per row of `d`.
fn rms_norm(x: &[f32], weight: &[f32], d: usize, eps: f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let ms = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / d as f64;
        let r = (1.0 / (ms + eps as f64).sqrt()) as f32;
        out.extend(row.iter().zip(weight).map(|(&v, &w)| v * r * w));
    }
    out
}

/// `x * (1 + scale) + shift` on every row.
fn modulate(x: &mut [f32], scale: &[f32], shift: &[f32]) {
    for row in x.chunks_exact_mut(scale.len()) {
        for ((v, &s), &b) in row.iter_mut().zip(scale).zip(shift) {
            *v = *v * (1.0 + s) + b;
        }
    }
}

/// `x += y * gate` on every row.
fn add_gated(x: &mut [f32], y: &[f32], gate: &[f32]) {
    for (xr, yr) in x
        .chunks_exact_mut(gate.len())
        .zip(y.chunks_exact(gate.len()))
    {
        for ((a, &b), &g) in xr.iter_mut().zip(yr).zip(gate) {
            *a += b * g;
        }
    }
}
