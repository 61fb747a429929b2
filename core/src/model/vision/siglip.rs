//! The SigLIP vision tower that several projector families put in front of their projector
//! (Gemma 3, Idefics3 / SmolVLM), recorded on a backend graph up to its final LayerNorm.
//!
//! The input is one `image_size²` RGB image, normalised and planar (`[3][H][W]`). It is cut
//! into `p × p` patches (row by row), each unfolded to `3·p·p` values in the conv kernel's
//! order, so the patch embedding is a product with the kernel seen as `n_embd` rows:
//! `x = patches·Wpᵀ + bp + pos[i]`. Then pre-LayerNorm blocks
//! `h = x + Wo·attn(LN1(x)) + bo`, `x' = h + W2·gelu(W1·LN2(h) + b1) + b2` with bidirectional
//! attention over all patches, and a final LayerNorm — llama.cpp's `build_vit` with learned
//! positions, as mtmd runs it for these projectors. The projector files add what follows.

use std::sync::Arc;

use super::mmproj::{VisionError, VisionHparams};
use crate::backend::{Backend, Graph, Readback, RowIndex, SeqSpan, StepBatch, TensorId, Weight};
use crate::dtype::GgmlType;
use crate::gguf::{write_gguf, ModelFile, TensorToWrite};

/// Patch rows are padded with zeros to a multiple of this many values (the GPU products take
/// whole 32-value blocks); zeros change no sum.
const PATCH_ALIGN: usize = 32;

/// Name of the patch kernel, in the mmproj and (re-laid out) in a derived file.
pub const PATCH_KERNEL: &str = "v.patch_embd.weight";

#[derive(Clone, Copy)]
struct Norm {
    w: Weight,
    b: Weight,
}

struct Block {
    ln1: Norm,
    wq: Weight,
    bq: Weight,
    wk: Weight,
    bk: Weight,
    wv: Weight,
    bv: Weight,
    wo: Weight,
    bo: Weight,
    ln2: Norm,
    up: Weight,
    bup: Weight,
    down: Weight,
    bdown: Weight,
}

/// A loaded SigLIP tower.
pub struct SiglipTower {
    hp: VisionHparams,
    patch_w: Weight,
    patch_b: Weight,
    pos: Weight,
    blocks: Vec<Block>,
    post_ln: Norm,
    /// The feed-forward's GELU computed in f32 ([`gelu_f32`]) rather than with the backend's
    /// `gelu` op (ggml's f16 table).
    f32_gelu: bool,
}

impl SiglipTower {
    /// Loads the tower's `v.*` tensors of `file` into `backend`, the patch kernel from
    /// `derived` (a file holding [`patch_kernel`]'s tensor).
    pub fn load(
        file: &Arc<ModelFile>,
        derived: &Arc<ModelFile>,
        hp: &VisionHparams,
        backend: &mut dyn Backend,
    ) -> Result<Self, VisionError> {
        if !hp.use_gelu {
            return Err(VisionError::Metadata {
                key: "clip.use_gelu".into(),
                message: "SigLIP uses GELU; this file says otherwise".into(),
            });
        }
        let mut load = |f: &Arc<ModelFile>, name: &str| backend.load_weight(f, name);
        let n = hp.n_embd;
        let ff = hp.n_ff;
        let side = hp.patches_per_side();
        let mut blocks = Vec::with_capacity(hp.n_layer);
        for i in 0..hp.n_layer {
            let mut t = |name: &str, cols: usize, rows: usize| -> Result<Weight, VisionError> {
                let name = format!("v.blk.{i}.{name}");
                expect(load(file, &name)?, &name, cols, rows)
            };
            blocks.push(Block {
                ln1: Norm {
                    w: t("ln1.weight", n, 1)?,
                    b: t("ln1.bias", n, 1)?,
                },
                wq: t("attn_q.weight", n, n)?,
                bq: t("attn_q.bias", n, 1)?,
                wk: t("attn_k.weight", n, n)?,
                bk: t("attn_k.bias", n, 1)?,
                wv: t("attn_v.weight", n, n)?,
                bv: t("attn_v.bias", n, 1)?,
                wo: t("attn_out.weight", n, n)?,
                bo: t("attn_out.bias", n, 1)?,
                ln2: Norm {
                    w: t("ln2.weight", n, 1)?,
                    b: t("ln2.bias", n, 1)?,
                },
                up: t("ffn_up.weight", n, ff)?,
                bup: t("ffn_up.bias", ff, 1)?,
                down: t("ffn_down.weight", ff, n)?,
                bdown: t("ffn_down.bias", n, 1)?,
            });
        }
        let mut t = |f: &Arc<ModelFile>, name: &str, cols: usize, rows: usize| {
            expect(load(f, name)?, name, cols, rows)
        };
        Ok(SiglipTower {
            patch_w: t(derived, PATCH_KERNEL, patch_cols(hp), n)?,
            patch_b: t(file, "v.patch_embd.bias", n, 1)?,
            pos: t(file, "v.position_embd.weight", n, side * side)?,
            post_ln: Norm {
                w: t(file, "v.post_ln.weight", n, 1)?,
                b: t(file, "v.post_ln.bias", n, 1)?,
            },
            blocks,
            hp: hp.clone(),
            f32_gelu: false,
        })
    }

    /// Chooses the feed-forward's GELU: in f32 ([`gelu_f32`], what transformers computes) or
    /// the backend's `gelu` op (the default: ggml's f16 table, as llama.cpp computes).
    pub fn set_f32_gelu(&mut self, on: bool) {
        self.f32_gelu = on;
    }

    /// The tower's shape.
    pub fn hparams(&self) -> &VisionHparams {
        &self.hp
    }

    /// Patches (rows of the tower's output) per image.
    pub fn n_patches(&self) -> usize {
        let side = self.hp.patches_per_side();
        side * side
    }

    /// Unfolds a normalised planar `[3][S][S]` image into one row per patch (patches row by
    /// row), each `[channel][y][x]` within the patch (the conv kernel's element order), then
    /// zeros up to a multiple of 32 values.
    pub fn unfold(&self, pixels: &[f32]) -> Result<Vec<f32>, VisionError> {
        let (s, p) = (self.hp.image_size, self.hp.patch_size);
        if pixels.len() != 3 * s * s {
            return Err(VisionError::Input(format!(
                "expected a {s}x{s} RGB image ({} values), got {} values",
                3 * s * s,
                pixels.len()
            )));
        }
        let side = s / p;
        let cols = patch_cols(&self.hp);
        let pad = cols - 3 * p * p;
        let mut out = Vec::with_capacity(side * side * cols);
        for py in 0..side {
            for px in 0..side {
                for c in 0..3 {
                    for ky in 0..p {
                        let at = c * s * s + (py * p + ky) * s + px * p;
                        out.extend_from_slice(&pixels[at..at + p]);
                    }
                }
                out.extend(std::iter::repeat_n(0.0, pad));
            }
        }
        Ok(out)
    }

    /// Records the tower over unfolded patches ([`Self::unfold`]) into a graph of one row per
    /// patch (positions `0..n` in the step batch); returns the `n_patches × n_embd` output of
    /// the final LayerNorm.
    pub fn build(&self, g: &mut Graph, patches: Arc<[f32]>) -> TensorId {
        let n = self.n_patches();
        let eps = self.hp.eps;
        let lin = |g: &mut Graph, w: Weight, b: Weight, x: TensorId| {
            let t = g.matmul(w, x);
            g.add_bias(t, b)
        };
        let ln = |g: &mut Graph, x: TensorId, n: Norm| g.layer_norm(x, Some(n.w), Some(n.b), eps);
        let x = g.input(patches, n, patch_cols(&self.hp));
        let x = lin(g, self.patch_w, self.patch_b, x);
        let pos = g.embed_rows(self.pos, RowIndex::Positions);
        let mut x = g.add(x, pos);
        let n_head = self.hp.n_head;
        let hd = self.hp.n_embd / n_head;
        let scale = 1.0 / (hd as f32).sqrt();
        let all = vec![SeqSpan {
            start: 0,
            len: n as u32,
            valid: n as u32,
        }];
        for b in &self.blocks {
            let h = ln(g, x, b.ln1);
            let q = lin(g, b.wq, b.bq, h);
            let k = lin(g, b.wk, b.bk, h);
            let v = lin(g, b.wv, b.bv, h);
            let a = g.encoder_attention(q, k, v, n_head, n_head, hd, scale, all.clone());
            let a = lin(g, b.wo, b.bo, a);
            x = g.add(a, x);
            let h = ln(g, x, b.ln2);
            let f = lin(g, b.up, b.bup, h);
            let f = if self.f32_gelu {
                gelu_f32(g, f)
            } else {
                g.gelu(f)
            };
            let f = lin(g, b.down, b.bdown, f);
            x = g.add(x, f);
        }
        ln(g, x, self.post_ln)
    }

    /// Runs a graph recorded with [`Self::build`] (and a projector after it, whose output is
    /// the graph's one output) on `backend`; returns that output, row-major.
    pub fn run(&self, backend: &mut dyn Backend, g: &Graph) -> Result<Vec<f32>, VisionError> {
        let (tokens, positions) = self.step_rows();
        let batch = StepBatch {
            tokens: &tokens,
            positions: &positions,
            seqs: &tokens,
        };
        embeddings(backend.execute(g, &batch)?)
    }

    /// [`run`](Self::run) with the readback awaited instead of blocked on (the browser's
    /// WebGPU cannot block).
    pub async fn run_async(
        &self,
        backend: &mut dyn Backend,
        g: &Graph,
    ) -> Result<Vec<f32>, VisionError> {
        let (tokens, positions) = self.step_rows();
        let batch = StepBatch {
            tokens: &tokens,
            positions: &positions,
            seqs: &tokens,
        };
        let pending = backend.submit(g, &batch)?;
        embeddings(pending.wait().await?)
    }

    /// A step's token ids (unused) and positions: one row per patch.
    fn step_rows(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.n_patches();
        (vec![0u32; n], (0..n as u32).collect())
    }
}

/// The one output of an encoder step.
fn embeddings(mut out: Vec<Readback>) -> Result<Vec<f32>, VisionError> {
    match out.pop() {
        Some(Readback::F32 { data, .. }) => Ok(data),
        _ => Err(VisionError::Input(
            "the backend returned no embeddings".into(),
        )),
    }
}

/// GELU (tanh form) in f32 from plain ops: `(x + x·tanh(√(2/π)·(x + 0.044715·x³))) / 2`.
/// The backends' `gelu` op is ggml's, which looks the value up in a table of f16 inputs and
/// outputs, as llama.cpp's text models need; for a vision tower that table alone puts
/// ~1e-3 between Weft and transformers (Idefics3: 1.0-1.2e-3; 3.1-3.8e-6 with this).
pub fn gelu_f32(g: &mut Graph, x: TensorId) -> TensorId {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let x2 = g.mul(x, x);
    let x3 = g.mul(x2, x);
    let c = g.scale(x3, 0.044_715);
    let inner = g.add(x, c);
    let u = g.scale(inner, SQRT_2_OVER_PI);
    // soft_cap(u, 1) = tanh(u)
    let t = g.soft_cap(u, 1.0);
    let xt = g.mul(x, t);
    let sum = g.add(x, xt);
    g.scale(sum, 0.5)
}

/// Values per unfolded patch row: `3·p·p`, padded to [`PATCH_ALIGN`].
pub fn patch_cols(hp: &VisionHparams) -> usize {
    (3 * hp.patch_size * hp.patch_size).next_multiple_of(PATCH_ALIGN)
}

/// Checks a loaded tensor's shape.
pub fn expect(w: Weight, name: &str, cols: usize, rows: usize) -> Result<Weight, VisionError> {
    if w.cols == cols && w.rows == rows {
        Ok(w)
    } else {
        Err(VisionError::Tensor {
            name: name.into(),
            message: format!(
                "expected {cols} x {rows} (values per row x rows), found {} x {}",
                w.cols, w.rows
            ),
        })
    }
}

/// Bytes per element of the unquantized types a re-laid-out tensor may have.
pub fn elem_size(ty: GgmlType) -> Option<usize> {
    match ty {
        GgmlType::F32 => Some(4),
        GgmlType::F16 | GgmlType::BF16 => Some(2),
        _ => None,
    }
}

/// A tensor re-laid out in memory for a product (see [`derived_file`]).
pub struct Derived {
    pub name: String,
    /// GGUF dims, innermost first: `[cols, rows]`.
    pub dims: [u64; 2],
    pub ty: GgmlType,
    pub data: Vec<u8>,
}

/// A tensor of `file` with its raw bytes and element size; unquantized types only.
pub fn raw_tensor<'a>(
    file: &'a ModelFile,
    name: &str,
    dims: &[u64],
) -> Result<(GgmlType, usize, &'a [u8]), VisionError> {
    let bad = |message: String| VisionError::Tensor {
        name: name.into(),
        message,
    };
    let (info, bytes) = file.tensor(name).ok_or_else(|| bad("missing".into()))?;
    if info.dims != dims {
        return Err(bad(format!(
            "expected dims {dims:?}, found {:?}",
            info.dims
        )));
    }
    let es = elem_size(info.ty).ok_or_else(|| {
        bad(format!(
            "type {:?} is not supported (f32, f16, bf16)",
            info.ty
        ))
    })?;
    Ok((info.ty, es, bytes))
}

/// The patch conv kernel `[p][p][3][n_embd]` (innermost first) viewed as `n_embd` rows of
/// `3·p·p` values, zero-padded like the unfolded patches, in its own type.
pub fn patch_kernel(file: &ModelFile, hp: &VisionHparams) -> Result<Derived, VisionError> {
    let (p, n) = (hp.patch_size as u64, hp.n_embd as u64);
    let (ty, es, bytes) = raw_tensor(file, PATCH_KERNEL, &[p, p, 3, n])?;
    let (k, kp) = (3 * hp.patch_size * hp.patch_size, patch_cols(hp));
    let mut data = vec![0u8; kp * hp.n_embd * es];
    for (dst, src) in data
        .chunks_exact_mut(kp * es)
        .zip(bytes.chunks_exact(k * es))
    {
        dst[..k * es].copy_from_slice(src);
    }
    Ok(Derived {
        name: PATCH_KERNEL.into(),
        dims: [kp as u64, n],
        ty,
        data,
    })
}

/// A small in-memory GGUF holding `tensors`, to load like the file's own.
pub fn derived_file(tensors: &[Derived]) -> Result<ModelFile, VisionError> {
    let list: Vec<TensorToWrite> = tensors
        .iter()
        .map(|t| TensorToWrite {
            name: &t.name,
            dims: &t.dims,
            ty: t.ty,
            data: &t.data,
        })
        .collect();
    let bytes = write_gguf(&[], &list, 32);
    ModelFile::from_vec(bytes).map_err(|e| VisionError::Tensor {
        name: tensors.first().map_or_else(String::new, |t| t.name.clone()),
        message: format!("re-laying out: {e}"),
    })
}
