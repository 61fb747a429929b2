//! Qwen2.5-VL's vision encoder and patch merger, from its mmproj (`clip.projector_type =
//! qwen2.5vl_merger`), recorded as a backend graph.
//!
//! The input is one normalised planar `[3][H][W]` image with both sides multiples of 28
//! (patch 14 × merge 2; dynamic resolution: any such size, see
//! [`crate::vision::preprocess::qwen2vl`]). Qwen2.5-VL's patches are 2 frames × 14 × 14; a
//! still image is the same frame twice, so the two temporal halves of the kernel
//! (`v.patch_embd.weight` and `v.patch_embd.weight.1`) are applied to the same pixels — their
//! sum is the kernel used here. Patches are ordered as the merger groups them: the 2 × 2
//! patches of each merged token together, and the merged tokens window by window (windows of
//! `clip.vision.window_size` px, 112 by default, i.e. 4 × 4 merged tokens, row by row; inside
//! a window row by row), which makes every attention window a run of consecutive rows.
//!
//! Blocks: `h = x + Wo·attn(rope(Wq·n + bq), rope(Wk·n + bk), Wv·n + bv) + bo` with
//! `n = rmsnorm(x)·ln1`, then `x' = h + Wd·(silu(Wg·m + bg) ⊙ (Wu·m + bu)) + bd` with
//! `m = rmsnorm(h)·ln2`. The rotary embedding is 2-D: of each head's pairs, the first half
//! turn by the patch's row, the second by its column ([`crate::backend::Op::RopeMulti`],
//! vision mode). Attention is restricted to each window except in the full-attention
//! blocks: every `clip.vision.n_wa_pattern`-th (blocks `k·n - 1`), or the blocks listed in
//! `clip.vision.wa_layer_indexes`. Then the merger: `rmsnorm(x)·post_ln`, each merged token's
//! four rows concatenated (4·width), `W2·gelu(W0·c + b0) + b2` to the text width, and the
//! tokens put back in row-major order of the merged grid. That is mtmd's `clip_graph_qwen2vl`
//! for this projector, except that the merger's GELU is the erf form of the model
//! (transformers' `nn.GELU()`) where mtmd takes the tanh approximation.

use std::sync::Arc;

use super::mmproj::{Mmproj, Projector, VisionError, VisionHparams};
use super::siglip::{derived_file, expect, patch_cols, raw_tensor, Derived};
use crate::backend::{Backend, Graph, MultiRope, Readback, SeqSpan, StepBatch, TensorId, Weight};
use crate::dtype::GgmlType;
use crate::gguf::ModelFile;
use crate::quant;

/// Patches per merged token side (`clip.vision.spatial_merge_size` when set).
const DEFAULT_MERGE: usize = 2;

/// Attention window side in pixels when the file does not set `clip.vision.window_size`.
const DEFAULT_WINDOW: usize = 112;

/// The vision tower's RoPE base (fixed in Qwen2-VL and Qwen2.5-VL).
const ROPE_BASE: f32 = 10000.0;

struct Block {
    ln1: Weight,
    wq: Weight,
    bq: Weight,
    wk: Weight,
    bk: Weight,
    wv: Weight,
    bv: Weight,
    wo: Weight,
    bo: Weight,
    ln2: Weight,
    gate: Weight,
    bgate: Weight,
    up: Weight,
    bup: Weight,
    down: Weight,
    bdown: Weight,
    /// Attends over the whole image rather than its window.
    full: bool,
}

/// The merged-token grid of an encoder input: `rows × cols` tokens, row by row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    pub rows: usize,
    pub cols: usize,
}

impl Grid {
    /// Tokens (embedding rows) of the image.
    pub fn n_tokens(&self) -> usize {
        self.rows * self.cols
    }
}

/// A loaded Qwen2.5-VL vision encoder.
pub struct Qwen25Vision {
    hp: VisionHparams,
    merge: usize,
    /// Window side in merged tokens.
    window: usize,
    patch_w: Weight,
    blocks: Vec<Block>,
    post_ln: Weight,
    /// `mm.0.weight` cut into the `merge²` column blocks that meet each patch of a merged
    /// token.
    mm0: Vec<Weight>,
    mm0_b: Weight,
    mm2: Weight,
    mm2_b: Weight,
    /// The re-laid-out tensors (kept alive for backends that use file bytes in place).
    _derived: Arc<ModelFile>,
}

impl Qwen25Vision {
    /// Loads the encoder of `mm` into `backend`.
    pub fn load(mm: &Mmproj, backend: &mut dyn Backend) -> Result<Self, VisionError> {
        if mm.projector != Projector::Qwen25VL {
            return Err(VisionError::UnsupportedProjector(format!(
                "{:?} (this loader is Qwen2.5-VL's)",
                mm.projector
            )));
        }
        let hp = mm.hparams.clone();
        let g = &mm.file.gguf;
        let meta = |key: &str, message: String| VisionError::Metadata {
            key: key.into(),
            message,
        };
        let opt_int = |key: &str| -> Result<Option<usize>, VisionError> {
            match g.get(key) {
                None => Ok(None),
                Some(v) => v
                    .as_u64()
                    .map(|v| Some(v as usize))
                    .ok_or_else(|| meta(key, format!("expected an integer, found {v}"))),
            }
        };
        if g.get_bool("clip.use_silu") != Some(true) {
            return Err(meta(
                "clip.use_silu",
                "Qwen2.5-VL's blocks use SiLU (SwiGLU); this file does not say so".into(),
            ));
        }
        let merge = opt_int("clip.vision.spatial_merge_size")?.unwrap_or(DEFAULT_MERGE);
        if merge != DEFAULT_MERGE {
            return Err(meta(
                "clip.vision.spatial_merge_size",
                format!("only a 2 x 2 merge is supported, found {merge}"),
            ));
        }
        let window_px = opt_int("clip.vision.window_size")?.unwrap_or(DEFAULT_WINDOW);
        let window = window_px / hp.patch_size / merge;
        if window == 0 {
            return Err(meta(
                "clip.vision.window_size",
                format!("{window_px} px is less than one merged token"),
            ));
        }
        let full = full_attention_layers(mm, hp.n_layer)?;
        let n = hp.n_embd;
        if !(n / hp.n_head).is_multiple_of(4) {
            return Err(meta(
                "clip.vision.attention.head_count",
                "the 2-D rotary embedding needs a head size that is a multiple of 4".into(),
            ));
        }
        let file = &mm.file;
        let derived = Arc::new(derived_weights(file, &hp, merge)?);
        let mut load = |f: &Arc<ModelFile>, name: &str| backend.load_weight(f, name);
        let ff = hp.n_ff;
        let mut blocks = Vec::with_capacity(hp.n_layer);
        for (i, &full) in full.iter().enumerate() {
            let mut t = |name: &str, cols: usize, rows: usize| -> Result<Weight, VisionError> {
                let name = format!("v.blk.{i}.{name}");
                expect(load(file, &name)?, &name, cols, rows)
            };
            blocks.push(Block {
                ln1: t("ln1.weight", n, 1)?,
                wq: t("attn_q.weight", n, n)?,
                bq: t("attn_q.bias", n, 1)?,
                wk: t("attn_k.weight", n, n)?,
                bk: t("attn_k.bias", n, 1)?,
                wv: t("attn_v.weight", n, n)?,
                bv: t("attn_v.bias", n, 1)?,
                wo: t("attn_out.weight", n, n)?,
                bo: t("attn_out.bias", n, 1)?,
                ln2: t("ln2.weight", n, 1)?,
                gate: t("ffn_gate.weight", n, ff)?,
                bgate: t("ffn_gate.bias", ff, 1)?,
                up: t("ffn_up.weight", n, ff)?,
                bup: t("ffn_up.bias", ff, 1)?,
                down: t("ffn_down.weight", ff, n)?,
                bdown: t("ffn_down.bias", n, 1)?,
                full,
            });
        }
        let mut t = |f: &Arc<ModelFile>, name: &str, cols: usize, rows: usize| {
            expect(load(f, name)?, name, cols, rows)
        };
        let m2 = merge * merge;
        let wide = n * m2;
        let mut mm0 = Vec::with_capacity(m2);
        for k in 0..m2 {
            mm0.push(t(&derived, &format!("mm.0.weight.part{k}"), n, wide)?);
        }
        Ok(Qwen25Vision {
            patch_w: t(&derived, "v.patch_embd.weight", patch_cols(&hp), n)?,
            post_ln: t(file, "v.post_ln.weight", n, 1)?,
            mm0,
            mm0_b: t(file, "mm.0.bias", wide, 1)?,
            mm2: t(file, "mm.2.weight", wide, hp.projection_dim)?,
            mm2_b: t(file, "mm.2.bias", hp.projection_dim, 1)?,
            blocks,
            hp,
            merge,
            window,
            _derived: derived,
        })
    }

    /// The tower's shape.
    pub fn hparams(&self) -> &VisionHparams {
        &self.hp
    }

    /// Width of each embedding (the text model's).
    pub fn n_out(&self) -> usize {
        self.hp.projection_dim
    }

    /// Pixels per side of a merged token (28): encoder input sides are multiples of it.
    pub fn align(&self) -> usize {
        self.hp.patch_size * self.merge
    }

    /// The merged-token grid of a `width × height` encoder input; an error unless both sides
    /// are positive multiples of [`Self::align`].
    pub fn grid(&self, width: usize, height: usize) -> Result<Grid, VisionError> {
        let a = self.align();
        if width == 0 || height == 0 || !width.is_multiple_of(a) || !height.is_multiple_of(a) {
            return Err(VisionError::Input(format!(
                "a Qwen2.5-VL encoder input must have sides that are positive multiples of {a} \
                 px, got {width}x{height}"
            )));
        }
        Ok(Grid {
            rows: height / a,
            cols: width / a,
        })
    }

    /// The merged tokens in the encoder's row order (window by window, each window row by
    /// row), as indices into the row-major grid.
    fn window_order(&self, grid: Grid) -> (Vec<usize>, Vec<u32>) {
        let w = self.window;
        let mut order = Vec::with_capacity(grid.n_tokens());
        let mut window_lens = Vec::new();
        for y0 in (0..grid.rows).step_by(w) {
            for x0 in (0..grid.cols).step_by(w) {
                let (wh, ww) = (w.min(grid.rows - y0), w.min(grid.cols - x0));
                for y in y0..y0 + wh {
                    for x in x0..x0 + ww {
                        order.push(y * grid.cols + x);
                    }
                }
                window_lens.push((wh * ww) as u32);
            }
        }
        (order, window_lens)
    }

    /// Unfolds a normalised planar `[3][height][width]` image into one row per patch, in the
    /// encoder's order (merged tokens window by window, the `merge × merge` patches of each
    /// together, row by row), each `[channel][y][x]` within the patch (the conv kernel's
    /// order) and zero-padded to a multiple of 32 values; with each row's patch position
    /// `[row, col, row, col]` for the rotary embedding.
    pub fn unfold(
        &self,
        pixels: &[f32],
        width: usize,
        height: usize,
    ) -> Result<(Vec<f32>, Vec<[u32; 4]>), VisionError> {
        let grid = self.grid(width, height)?;
        if pixels.len() != 3 * width * height {
            return Err(VisionError::Input(format!(
                "expected a {width}x{height} RGB image ({} values), got {} values",
                3 * width * height,
                pixels.len()
            )));
        }
        let (p, m) = (self.hp.patch_size, self.merge);
        let cols = patch_cols(&self.hp);
        let pad = cols - 3 * p * p;
        let plane = width * height;
        let n = grid.n_tokens() * m * m;
        let mut out = Vec::with_capacity(n * cols);
        let mut pos = Vec::with_capacity(n);
        for t in self.window_order(grid).0 {
            let (ty, tx) = (t / grid.cols, t % grid.cols);
            for dy in 0..m {
                for dx in 0..m {
                    let (py, px) = (ty * m + dy, tx * m + dx);
                    for c in 0..3 {
                        for ky in 0..p {
                            let at = c * plane + (py * p + ky) * width + px * p;
                            out.extend_from_slice(&pixels[at..at + p]);
                        }
                    }
                    out.extend(std::iter::repeat_n(0.0, pad));
                    pos.push([py as u32, px as u32, py as u32, px as u32]);
                }
            }
        }
        Ok((out, pos))
    }

    /// Records the encoder over a `width × height` image's unfolded patches and their
    /// positions ([`Self::unfold`]) into a graph of one row per patch; returns the
    /// `n_tokens × n_out` embeddings, row-major over the merged grid.
    pub fn build(
        &self,
        g: &mut Graph,
        grid: Grid,
        patches: Arc<[f32]>,
        positions: Arc<[[u32; 4]]>,
    ) -> TensorId {
        let m2 = self.merge * self.merge;
        let n = grid.n_tokens() * m2;
        let eps = self.hp.eps;
        let width = self.hp.n_embd;
        let n_head = self.hp.n_head;
        let hd = width / n_head;
        let scale = 1.0 / (hd as f32).sqrt();
        let q4 = (hd / 4) as u32;
        let sections = [q4; 4];
        let lin = |g: &mut Graph, w: Weight, b: Weight, x: TensorId| {
            let t = g.matmul(w, x);
            g.add_bias(t, b)
        };
        let (order, lens) = self.window_order(grid);
        let mut windows = Vec::with_capacity(lens.len());
        let mut start = 0u32;
        for len in lens {
            let rows = len * m2 as u32;
            windows.push(SeqSpan {
                start,
                len: rows,
                valid: rows,
            });
            start += rows;
        }
        let all = vec![SeqSpan {
            start: 0,
            len: n as u32,
            valid: n as u32,
        }];
        let x = g.input(patches, n, patch_cols(&self.hp));
        let mut x = g.matmul(self.patch_w, x);
        for b in &self.blocks {
            let h = g.rms_norm(x, Some(b.ln1), eps, width);
            let q = lin(g, b.wq, b.bq, h);
            let k = lin(g, b.wk, b.bk, h);
            let v = lin(g, b.wv, b.bv, h);
            let q = g.rope_multi(
                q,
                hd,
                hd,
                ROPE_BASE,
                sections,
                MultiRope::Vision,
                positions.clone(),
            );
            let k = g.rope_multi(
                k,
                hd,
                hd,
                ROPE_BASE,
                sections,
                MultiRope::Vision,
                positions.clone(),
            );
            let spans = if b.full { all.clone() } else { windows.clone() };
            let a = g.encoder_attention(q, k, v, n_head, n_head, hd, scale, spans);
            let a = lin(g, b.wo, b.bo, a);
            x = g.add(x, a);
            let h = g.rms_norm(x, Some(b.ln2), eps, width);
            let gate = lin(g, b.gate, b.bgate, h);
            let up = lin(g, b.up, b.bup, h);
            let f = g.swiglu(gate, up);
            let f = lin(g, b.down, b.bdown, f);
            x = g.add(x, f);
        }
        let x = g.rms_norm(x, Some(self.post_ln), eps, width);
        // W0 · [x₀ x₁ x₂ x₃] as Σₖ W0ₖ · xₖ, xₖ the k-th patch row of every merged token.
        let mut y: Option<TensorId> = None;
        for (k, &w) in self.mm0.iter().enumerate() {
            let rows: Vec<u32> = (0..grid.n_tokens()).map(|t| (t * m2 + k) as u32).collect();
            let xk = g.select_rows(x, rows);
            let p = g.matmul(w, xk);
            y = Some(match y {
                Some(acc) => g.add(acc, p),
                None => p,
            });
        }
        let y = y.expect("a merge of at least one patch");
        let y = g.add_bias(y, self.mm0_b);
        let y = g.gelu_erf(y);
        let y = lin(g, self.mm2, self.mm2_b, y);
        // Back from window order to the row-major grid.
        let mut back = vec![0u32; order.len()];
        for (at, &t) in order.iter().enumerate() {
            back[t] = at as u32;
        }
        g.select_rows(y, back)
    }

    /// Encodes one normalised planar `[3][height][width]` image on `backend`:
    /// `grid.n_tokens() × n_out` embeddings, row-major over the merged grid.
    pub fn encode(
        &self,
        backend: &mut dyn Backend,
        pixels: &[f32],
        width: usize,
        height: usize,
    ) -> Result<Vec<f32>, VisionError> {
        let grid = self.grid(width, height)?;
        let (patches, positions) = self.unfold(pixels, width, height)?;
        let n = positions.len();
        let mut g = Graph::new(n);
        let out = self.build(&mut g, grid, patches.into(), positions.into());
        g.output(out);
        let tokens = vec![0u32; n];
        let steps: Vec<u32> = (0..n as u32).collect();
        let batch = StepBatch {
            tokens: &tokens,
            positions: &steps,
            seqs: &tokens,
        };
        match backend.execute(&g, &batch)?.pop() {
            Some(Readback::F32 { data, .. }) => Ok(data),
            _ => Err(VisionError::Input(
                "the backend returned no embeddings".into(),
            )),
        }
    }
}

/// Which blocks attend over the whole image: from `clip.vision.n_wa_pattern` (blocks
/// `i` with `(i + 1) % n == 0`) or else `clip.vision.wa_layer_indexes`; with neither, all.
fn full_attention_layers(mm: &Mmproj, n_layer: usize) -> Result<Vec<bool>, VisionError> {
    let g = &mm.file.gguf;
    let bad = |key: &str, message: String| VisionError::Metadata {
        key: key.into(),
        message,
    };
    let key = "clip.vision.n_wa_pattern";
    if let Some(v) = g.get(key) {
        let n = v
            .as_u64()
            .filter(|&n| n > 0)
            .ok_or_else(|| bad(key, format!("expected a positive integer, found {v}")))?
            as usize;
        return Ok((0..n_layer).map(|i| (i + 1).is_multiple_of(n)).collect());
    }
    let key = "clip.vision.wa_layer_indexes";
    if let Some(items) = g.get_array(key) {
        let mut full = vec![false; n_layer];
        for v in items {
            let i = v
                .as_u64()
                .map(|i| i as usize)
                .filter(|&i| i < n_layer)
                .ok_or_else(|| bad(key, format!("{v} is not a block index below {n_layer}")))?;
            full[i] = true;
        }
        return Ok(full);
    }
    Ok(vec![true; n_layer])
}

/// An unquantized tensor's values as f32.
fn values(file: &ModelFile, name: &str, dims: &[u64]) -> Result<Vec<f32>, VisionError> {
    // `raw_tensor` lets through f32, f16 and bf16 only, with the byte count of `dims`.
    let (ty, _, bytes) = raw_tensor(file, name, dims)?;
    let n = dims.iter().product::<u64>() as usize;
    quant::dequantize_to_vec(ty, bytes, n).map_err(|e| VisionError::Tensor {
        name: name.to_string(),
        message: e.to_string(),
    })
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The tensors whose file layout is not what a product needs, re-laid out (in f32) into a
/// small in-memory GGUF: the patch kernel, the sum of its two temporal halves
/// (`[p][p][3][n_embd]` each, innermost first) as `n_embd` rows of `3·p·p` values padded like
/// the unfolded patches; and `mm.0.weight` (`wide` rows of `wide = merge²·n_embd` values) cut
/// into `merge²` matrices of `wide` rows × `n_embd`, one per patch of a merged token.
fn derived_weights(
    file: &ModelFile,
    hp: &VisionHparams,
    merge: usize,
) -> Result<ModelFile, VisionError> {
    let (p, n) = (hp.patch_size as u64, hp.n_embd as u64);
    let dims = [p, p, 3, n];
    let k0 = values(file, "v.patch_embd.weight", &dims)?;
    let k1 = values(file, "v.patch_embd.weight.1", &dims)?;
    let (k, kp) = (3 * hp.patch_size * hp.patch_size, patch_cols(hp));
    let mut patch = vec![0f32; kp * hp.n_embd];
    for (o, dst) in patch.chunks_exact_mut(kp).enumerate() {
        for (j, d) in dst[..k].iter_mut().enumerate() {
            *d = k0[o * k + j] + k1[o * k + j];
        }
    }
    let wide = hp.n_embd * merge * merge;
    let w0 = values(file, "mm.0.weight", &[wide as u64, wide as u64])?;
    let parts: Vec<Vec<u8>> = (0..merge * merge)
        .map(|part| {
            let mut m = Vec::with_capacity(wide * hp.n_embd);
            for row in w0.chunks_exact(wide) {
                m.extend_from_slice(&row[part * hp.n_embd..(part + 1) * hp.n_embd]);
            }
            f32_bytes(&m)
        })
        .collect();
    let mut tensors = vec![Derived {
        name: "v.patch_embd.weight".into(),
        dims: [kp as u64, n],
        ty: GgmlType::F32,
        data: f32_bytes(&patch),
    }];
    for (k, data) in parts.into_iter().enumerate() {
        tensors.push(Derived {
            name: format!("mm.0.weight.part{k}"),
            dims: [n, wide as u64],
            ty: GgmlType::F32,
            data,
        });
    }
    derived_file(&tensors)
}
