//! Gemma 3's vision encoder (SigLIP) and projector, from its mmproj (`clip.projector_type =
//! gemma3`), recorded as a backend graph.
//!
//! The input is one `image_size²` RGB image, normalised and planar (`[3][H][W]`). It is cut
//! into `p × p` patches (row by row), each unfolded to `3·p·p` values in the conv kernel's
//! order, so the patch embedding is a product with the kernel seen as `n_embd` rows:
//! `x = patches·Wpᵀ + bp + pos[i]`. Then pre-LayerNorm blocks
//! `h = x + Wo·attn(LN1(x)) + bo`, `x' = h + W2·gelu(W1·LN2(h) + b1) + b2` with bidirectional
//! attention over all patches; a final LayerNorm; `k × k` average pooling of the patch grid
//! (k = 4: 64² patches to 16² tokens); RMSNorm times `mm.soft_emb_norm` (the converter already
//! stored Gemma's `1 + w`); and the projection to the text model's width. That is llama.cpp's
//! order of operations (mtmd's `clip_graph_siglip` for this projector).

use std::sync::Arc;

use super::mmproj::{Mmproj, Projector, VisionError, VisionHparams};
use crate::backend::{Backend, Graph, Readback, RowIndex, SeqSpan, StepBatch, TensorId, Weight};
use crate::dtype::GgmlType;
use crate::gguf::{write_gguf, ModelFile, TensorToWrite};

/// Patch rows are padded with zeros to a multiple of this many values (the GPU products take
/// whole 32-value blocks); zeros change no sum.
const PATCH_ALIGN: usize = 32;

/// llama.cpp's pooling kernel for Gemma 3 when the file does not set
/// `clip.vision.projector.scale_factor`.
const DEFAULT_POOL: usize = 4;

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

/// A loaded Gemma 3 vision encoder.
pub struct Gemma3Vision {
    hp: VisionHparams,
    /// Pooling kernel side.
    pool: usize,
    patch_w: Weight,
    patch_b: Weight,
    pos: Weight,
    blocks: Vec<Block>,
    post_ln: Norm,
    soft_norm: Weight,
    proj: Weight,
    /// The re-laid-out tensors (kept alive for backends that use file bytes in place).
    _derived: Arc<ModelFile>,
}

impl Gemma3Vision {
    /// Loads the encoder of `mm` into `backend`.
    pub fn load(mm: &Mmproj, backend: &mut dyn Backend) -> Result<Self, VisionError> {
        if mm.projector != Projector::Gemma3 {
            return Err(VisionError::UnsupportedProjector(format!(
                "{:?} (this loader is Gemma 3's)",
                mm.projector
            )));
        }
        let hp = mm.hparams.clone();
        if !hp.use_gelu {
            return Err(VisionError::Metadata {
                key: "clip.use_gelu".into(),
                message: "Gemma 3's SigLIP uses GELU; this file says otherwise".into(),
            });
        }
        let pool = hp.scale_factor.unwrap_or(DEFAULT_POOL);
        let side = hp.patches_per_side();
        if pool == 0 || !side.is_multiple_of(pool) {
            return Err(VisionError::Metadata {
                key: "clip.vision.projector.scale_factor".into(),
                message: format!("pooling by {pool} does not divide {side} patches per side"),
            });
        }
        let file = &mm.file;
        let derived = Arc::new(derived_weights(file, &hp)?);
        let mut load = |f: &Arc<ModelFile>, name: &str| backend.load_weight(f, name);
        let n = hp.n_embd;
        let (ff, p2) = (hp.n_ff, patch_cols(&hp));
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
        Ok(Gemma3Vision {
            patch_w: t(&derived, "v.patch_embd.weight", p2, n)?,
            patch_b: t(file, "v.patch_embd.bias", n, 1)?,
            pos: t(file, "v.position_embd.weight", n, side * side)?,
            post_ln: Norm {
                w: t(file, "v.post_ln.weight", n, 1)?,
                b: t(file, "v.post_ln.bias", n, 1)?,
            },
            soft_norm: t(file, "mm.soft_emb_norm.weight", n, 1)?,
            proj: t(&derived, "mm.input_projection.weight", n, hp.projection_dim)?,
            blocks,
            hp,
            pool,
            _derived: derived,
        })
    }

    /// The tower's shape.
    pub fn hparams(&self) -> &VisionHparams {
        &self.hp
    }

    /// Embeddings per image (after pooling).
    pub fn n_tokens(&self) -> usize {
        let s = self.hp.patches_per_side() / self.pool;
        s * s
    }

    /// Width of each embedding (the text model's).
    pub fn n_out(&self) -> usize {
        self.hp.projection_dim
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
        let pad = patch_cols(&self.hp) - 3 * p * p;
        let mut out = Vec::with_capacity(side * side * patch_cols(&self.hp));
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

    /// Records the encoder over unfolded patches ([`Self::unfold`]) into a graph of one row
    /// per patch; returns the `n_tokens × n_out` embeddings.
    pub fn build(&self, g: &mut Graph, patches: Arc<[f32]>) -> TensorId {
        let side = self.hp.patches_per_side();
        let n = side * side;
        let p2 = patch_cols(&self.hp);
        let eps = self.hp.eps;
        let lin = |g: &mut Graph, w: Weight, b: Weight, x: TensorId| {
            let t = g.matmul(w, x);
            g.add_bias(t, b)
        };
        let ln = |g: &mut Graph, x: TensorId, n: Norm| g.layer_norm(x, Some(n.w), Some(n.b), eps);
        let x = g.input(patches, n, p2);
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
            let f = g.gelu(f);
            let f = lin(g, b.down, b.bdown, f);
            x = g.add(x, f);
        }
        x = ln(g, x, self.post_ln);
        x = g.avg_pool_2d(x, side, side, self.pool);
        x = g.rms_norm(x, Some(self.soft_norm), eps, self.hp.n_embd);
        g.matmul(self.proj, x)
    }

    /// Encodes one normalised planar `[3][S][S]` image on `backend`: `n_tokens × n_out`
    /// embeddings, row-major.
    pub fn encode(
        &self,
        backend: &mut dyn Backend,
        pixels: &[f32],
    ) -> Result<Vec<f32>, VisionError> {
        let patches: Arc<[f32]> = self.unfold(pixels)?.into();
        let side = self.hp.patches_per_side();
        let n = side * side;
        let mut g = Graph::new(n);
        let out = self.build(&mut g, patches);
        g.output(out);
        let tokens = vec![0u32; n];
        let positions: Vec<u32> = (0..n as u32).collect();
        let batch = StepBatch {
            tokens: &tokens,
            positions: &positions,
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

/// Values per unfolded patch row: `3·p·p`, padded to [`PATCH_ALIGN`].
fn patch_cols(hp: &VisionHparams) -> usize {
    (3 * hp.patch_size * hp.patch_size).next_multiple_of(PATCH_ALIGN)
}

/// Checks a loaded tensor's shape.
fn expect(w: Weight, name: &str, cols: usize, rows: usize) -> Result<Weight, VisionError> {
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
fn elem_size(ty: GgmlType) -> Option<usize> {
    match ty {
        GgmlType::F32 => Some(4),
        GgmlType::F16 | GgmlType::BF16 => Some(2),
        _ => None,
    }
}

/// The two tensors whose file layout is not `rows × cols` for a product, re-laid out into a
/// small in-memory GGUF: the patch conv kernel `[p][p][3][n_embd]` (innermost first) viewed as
/// `n_embd` rows of `3·p·p` values, zero-padded like the unfolded patches, and the projection, stored `[proj][n_embd]` to
/// be used transposed (`x · W`), transposed to `proj` rows of `n_embd` in its own type (f16
/// in converted files, as llama.cpp multiplies it).
fn derived_weights(file: &ModelFile, hp: &VisionHparams) -> Result<ModelFile, VisionError> {
    let get = |name: &str| {
        file.tensor(name).ok_or_else(|| VisionError::Tensor {
            name: name.into(),
            message: "missing".into(),
        })
    };
    let bad = |name: &str, message: String| VisionError::Tensor {
        name: name.into(),
        message,
    };
    let (p, n) = (hp.patch_size as u64, hp.n_embd as u64);
    let pe = "v.patch_embd.weight";
    let (info, patch_bytes) = get(pe)?;
    if info.dims != [p, p, 3, n] {
        return Err(bad(
            pe,
            format!("expected dims [{p}, {p}, 3, {n}], found {:?}", info.dims),
        ));
    }
    let patch_ty = info.ty;
    let pes = elem_size(patch_ty)
        .ok_or_else(|| bad(pe, format!("type {patch_ty:?} is not supported")))?;
    let (k, kp) = (3 * hp.patch_size * hp.patch_size, patch_cols(hp));
    let mut patch_w = vec![0u8; kp * hp.n_embd * pes];
    for (dst, src) in patch_w
        .chunks_exact_mut(kp * pes)
        .zip(patch_bytes.chunks_exact(k * pes))
    {
        dst[..k * pes].copy_from_slice(src);
    }
    let ip = "mm.input_projection.weight";
    let (info, proj_bytes) = get(ip)?;
    let d = hp.projection_dim as u64;
    if info.dims != [d, n] {
        return Err(bad(
            ip,
            format!("expected dims [{d}, {n}], found {:?}", info.dims),
        ));
    }
    let proj_ty = info.ty;
    let es = elem_size(proj_ty).ok_or_else(|| {
        bad(
            ip,
            format!("type {proj_ty:?} is not supported (f32, f16, bf16)"),
        )
    })?;
    let (d, n) = (d as usize, n as usize);
    // Element (o, i) of the stored matrix is at i·d + o; the transposed one at o·n + i.
    let mut proj_t = vec![0u8; proj_bytes.len()];
    for i in 0..n {
        for o in 0..d {
            let src = (i * d + o) * es;
            let dst = (o * n + i) * es;
            proj_t[dst..dst + es].copy_from_slice(&proj_bytes[src..src + es]);
        }
    }
    let tensors = [
        TensorToWrite {
            name: pe,
            dims: &[kp as u64, n as u64],
            ty: patch_ty,
            data: &patch_w,
        },
        TensorToWrite {
            name: ip,
            dims: &[n as u64, d as u64],
            ty: proj_ty,
            data: &proj_t,
        },
    ];
    let bytes = write_gguf(&[], &tensors, 32);
    ModelFile::from_vec(bytes).map_err(|e| bad(ip, format!("re-laying out: {e}")))
}
