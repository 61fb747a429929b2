//! Wan's diffusion transformer (`WanTransformer3DModel` in diffusers) as a graph on the
//! backend trait, one latent video (batch 1) per call: weights from a `ModelFile` under the
//! GGUF names (`wan_dit_weights.rs`), the patches unfolded on the host, one graph per
//! forward, the output unpatchified on the host.
//!
//! Facts followed (diffusers 0.37's transformer_wan.py, see tests/data/video/README.md):
//! patches (conv3d with kernel = stride) become tokens in frame, row, column order; the
//! timestep sinusoid goes through linear-SiLU-linear (`temb`), then SiLU-linear to the six
//! modulations (shift, scale, gate, c_shift, c_scale, c_gate) added to each block's
//! `scale_shift_table`; text rows go through linear-GELU(tanh)-linear and all of them,
//! padding included, are attended to; q / k get an RMS norm over all heads together before
//! the head split; the output norm is modulated by `scale_shift_table + temb`.

use std::path::Path;
use std::sync::Arc;

use super::files::{read_config, ModelFileError};
use super::wan_dit_weights::{self as weights, padded, Attn, DitWeights, Lin};
use super::wan_gguf::open_dit;
use super::wan_names::open_diffusers_dit;
use super::wan_rope::{axis_dims, timestep_sinusoid};
use crate::backend::{Backend, Graph, MultiRope, Readback, SeqSpan, StepBatch, TensorId};
use crate::gguf::ModelFile;
use crate::model::vision::siglip::gelu_f32;

/// Wan's rotary base.
const ROPE_BASE: f32 = 10000.0;

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

    pub(super) fn patch_volume(&self) -> usize {
        self.patch_size.iter().product()
    }
}

/// A Wan transformer loaded into a backend.
pub struct WanDit {
    pub config: WanDitConfig,
    w: DitWeights,
}

impl WanDit {
    /// Loads the DiT weights of `file` (tensors under the GGUF names, see `wan_names.rs`)
    /// into `backend`, each checked against `config`'s shapes.
    pub fn load(
        config: WanDitConfig,
        file: &Arc<ModelFile>,
        backend: &mut dyn Backend,
    ) -> Result<Self, WanDitError> {
        let w = weights::load(&config, file, backend)?;
        Ok(WanDit { config, w })
    }

    /// Loads a diffusers `transformer/` folder (config.json and the safetensors weights, seen
    /// under the GGUF names in place: [`open_diffusers_dit`]).
    pub fn load_diffusers(dir: &Path, backend: &mut dyn Backend) -> Result<Self, WanDitError> {
        let config = WanDitConfig::from_json(&dir.join("config.json"))?;
        let file = Arc::new(open_diffusers_dit(dir)?);
        Self::load(config, &file, backend)
    }

    /// Loads a Wan DiT GGUF file (city96's layout, the config inferred from its shapes:
    /// [`open_dit`]); quantized tensors stay quantized. Wan 2.1 I2V's image cross-attention
    /// is refused by name.
    pub fn load_gguf(path: &Path, backend: &mut dyn Backend) -> Result<Self, WanDitError> {
        let (file, info) = open_dit(path)?;
        if let Some(d) = info.image_dim {
            return Err(WanDitError::Config {
                path: path.display().to_string(),
                message: format!(
                    "image features of width {d} (the image cross-attention of Wan 2.1 I2V) \
                     are not supported"
                ),
            });
        }
        Self::load(info.config, &Arc::new(file), backend)
    }

    /// The model's prediction (the flow velocity), `[out_channels, frames, height, width]`,
    /// for `latents` `[in_channels, frames, height, width]` at `timestep`, conditioned on
    /// `text` (rows of `text_dim` values: the text encoder's output, padding rows included),
    /// computed on `backend` (the one the weights were loaded into).
    pub fn forward(
        &self,
        backend: &mut dyn Backend,
        latents: &[f32],
        [frames, height, width]: [usize; 3],
        timestep: f32,
        text: &[f32],
    ) -> Result<Vec<f32>, WanDitError> {
        let c = &self.config;
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
        let n = grid.iter().product::<usize>();
        let g = self.graph(latents, [frames, height, width], grid, timestep, text);
        let tokens = vec![0u32; n];
        let positions: Vec<u32> = (0..n as u32).collect();
        let batch = StepBatch {
            tokens: &tokens,
            positions: &positions,
            seqs: &tokens,
        };
        let out = backend
            .execute(&g, &batch)
            .map_err(|e| WanDitError::Input(format!("running the transformer: {e}")))?;
        match out.into_iter().next() {
            Some(Readback::F32 { data, .. }) => Ok(self.unpatchify(&data, grid)),
            _ => Err(WanDitError::Input(
                "the backend returned no prediction".into(),
            )),
        }
    }

    /// The forward graph: one row per patch token.
    fn graph(
        &self,
        latents: &[f32],
        size: [usize; 3],
        grid: [usize; 3],
        timestep: f32,
        text: &[f32],
    ) -> Graph {
        let c = &self.config;
        let w = &self.w;
        let dim = c.dim();
        let n = grid.iter().product::<usize>();
        let mut g = Graph::new(n);
        let patch_cols = padded(c.in_channels * c.patch_volume());
        let x = g.input(self.patchify(latents, size).into(), n, patch_cols);
        let mut x = lin(&mut g, w.patch, x);

        // Conditioning: temb for the output norm, its projection's six parts for the blocks.
        let ts = g.input(
            timestep_sinusoid(timestep, c.freq_dim).into(),
            1,
            c.freq_dim,
        );
        let h = lin(&mut g, w.time_1, ts);
        let h = g.silu(h);
        let temb = lin(&mut g, w.time_2, h);
        let st = g.silu(temb);
        let time_mod = lin(&mut g, w.time_proj, st);
        let parts: Vec<TensorId> = (0..6)
            .map(|i| g.slice_cols(time_mod, i * dim, dim))
            .collect();
        let text_rows = text.len() / c.text_dim;
        let text_cols = padded(c.text_dim);
        let ctx = g.input(
            pad_rows(text, c.text_dim, text_cols).into(),
            text_rows,
            text_cols,
        );
        let ctx = lin(&mut g, w.text_1, ctx);
        let ctx = gelu_f32(&mut g, ctx);
        let ctx = lin(&mut g, w.text_2, ctx);
        let ones = g.input(vec![1f32; dim].into(), 1, dim);

        let rope = Rope3d::new(c.head_dim, grid);
        for b in &w.blocks {
            let m: Vec<TensorId> = (0..6)
                .map(|i| g.add_bias(parts[i], b.modulation[i]))
                .collect();
            let h = self.modulated_norm(&mut g, x, m[1], m[0], ones);
            let a = self.attention(&mut g, &b.self_attn, h, h, Some(&rope));
            let a = g.mul_row(a, m[2]);
            x = g.add(x, a);
            let h = match b.cross_norm {
                Some((nw, nb)) => g.layer_norm(x, Some(nw), Some(nb), c.eps),
                None => x,
            };
            let a = self.attention(&mut g, &b.cross_attn, h, ctx, None);
            x = g.add(x, a);
            let h = self.modulated_norm(&mut g, x, m[4], m[3], ones);
            let f = lin(&mut g, b.ffn_in, h);
            let f = gelu_f32(&mut g, f);
            let f = lin(&mut g, b.ffn_out, f);
            let f = g.mul_row(f, m[5]);
            x = g.add(x, f);
        }

        // Output norm modulated by the head's table + temb, then the patch projection.
        let shift = g.add_bias(temb, w.head_modulation[0]);
        let scale = g.add_bias(temb, w.head_modulation[1]);
        let h = self.modulated_norm(&mut g, x, scale, shift, ones);
        let y = lin(&mut g, w.head, h);
        g.output(y);
        g
    }

    /// `LayerNorm(x) · (1 + scale) + shift` (no affine parameters), scale and shift one row.
    fn modulated_norm(
        &self,
        g: &mut Graph,
        x: TensorId,
        scale: TensorId,
        shift: TensorId,
        ones: TensorId,
    ) -> TensorId {
        let n = g.layer_norm(x, None, None, self.config.eps);
        let s = g.add(scale, ones);
        let n = g.mul_row(n, s);
        g.add_row(n, shift)
    }

    /// Multi-head attention of the rows of `h` over the rows of `kv`: q / k RMS-normed over
    /// all heads, then rotated when `rope` is given (self-attention); no mask.
    fn attention(
        &self,
        g: &mut Graph,
        a: &Attn,
        h: TensorId,
        kv: TensorId,
        rope: Option<&Rope3d>,
    ) -> TensorId {
        let c = &self.config;
        let (dim, hd, heads) = (c.dim(), c.head_dim, c.num_heads);
        let q = lin(g, a.q, h);
        let q = g.rms_norm(q, Some(a.norm_q), c.eps, dim);
        let k = lin(g, a.k, kv);
        let k = g.rms_norm(k, Some(a.norm_k), c.eps, dim);
        let v = lin(g, a.v, kv);
        let scale = 1.0 / (hd as f32).sqrt();
        let (rows, kv_rows) = (g.shape(q).0, g.shape(k).0);
        let all = |n: usize| {
            vec![SeqSpan {
                start: 0,
                len: n as u32,
                valid: n as u32,
            }]
        };
        let out = match rope {
            Some(r) => {
                let q = r.apply(g, q);
                let k = r.apply(g, k);
                g.encoder_attention(q, k, v, heads, heads, hd, scale, all(rows))
            }
            None => g.cross_attention(q, k, v, heads, heads, hd, scale, all(rows), all(kv_rows)),
        };
        lin(g, a.o, out)
    }

    /// Tokens of `in_channels * patch volume` values, in (frame, row, column) order, laid out
    /// as the conv3d weight's `[in, pt, ph, pw]`, zeros after them up to whole 32-value
    /// blocks.
    fn patchify(&self, latents: &[f32], [t, h, w]: [usize; 3]) -> Vec<f32> {
        let c = &self.config;
        let [pt, ph, pw] = c.patch_size;
        let cols = c.in_channels * c.patch_volume();
        let mut out = Vec::with_capacity(padded(cols) * latents.len() / cols);
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
                    out.resize(out.len().next_multiple_of(padded(cols)), 0.0);
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
}

/// `x · wᵀ + b`.
fn lin(g: &mut Graph, l: Lin, x: TensorId) -> TensorId {
    let y = g.matmul(l.w, x);
    g.add_bias(y, l.b)
}

/// Rows of `cols` values from rows of `width` (zeros after).
fn pad_rows(x: &[f32], width: usize, cols: usize) -> Vec<f32> {
    if width == cols {
        return x.to_vec();
    }
    let mut out = Vec::with_capacity(x.len() / width * cols);
    for row in x.chunks_exact(width) {
        out.extend_from_slice(row);
        out.resize(out.len() + cols - width, 0.0);
    }
    out
}

/// The 3-D rotary embedding of a token grid: each token's (frame, row, column) and the
/// head's split into frame / row / column pairs.
struct Rope3d {
    head_dim: usize,
    sections: [u32; 4],
    positions: Arc<[[u32; 4]]>,
}

impl Rope3d {
    fn new(head_dim: usize, [t, h, w]: [usize; 3]) -> Rope3d {
        let d = axis_dims(head_dim);
        let positions: Vec<[u32; 4]> = (0..t)
            .flat_map(|f| (0..h).flat_map(move |r| (0..w).map(move |c| [f, r, c, 0])))
            .map(|p| p.map(|v| v as u32))
            .collect();
        Rope3d {
            head_dim,
            sections: [d[0] as u32 / 2, d[1] as u32 / 2, d[2] as u32 / 2, 0],
            positions: positions.into(),
        }
    }

    fn apply(&self, g: &mut Graph, x: TensorId) -> TensorId {
        let (hd, s) = (self.head_dim, self.sections);
        g.rope_multi(
            x,
            hd,
            hd,
            ROPE_BASE,
            s,
            MultiRope::Video,
            self.positions.clone(),
        )
    }
}
