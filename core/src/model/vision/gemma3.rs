//! Gemma 3's vision encoder (SigLIP) and projector, from its mmproj (`clip.projector_type =
//! gemma3`), recorded as a backend graph.
//!
//! The [SigLIP tower](super::siglip) over one `image_size²` image, then `k × k` average pooling
//! of the patch grid (k = 4: 64² patches to 16² tokens); RMSNorm times `mm.soft_emb_norm` (the
//! converter already stored Gemma's `1 + w`); and the projection to the text model's width.
//! That is llama.cpp's order of operations (mtmd's `clip_graph_siglip` for this projector).

use std::sync::Arc;

use super::mmproj::{Mmproj, Projector, VisionError, VisionHparams};
use super::siglip::{self, Derived, SiglipTower};
use crate::backend::{Backend, Graph, TensorId, Weight};
use crate::gguf::ModelFile;

/// llama.cpp's pooling kernel for Gemma 3 when the file does not set
/// `clip.vision.projector.scale_factor`.
const DEFAULT_POOL: usize = 4;

/// The projection's name, in the mmproj and (transposed) in the derived file.
const PROJ: &str = "mm.input_projection.weight";

/// A loaded Gemma 3 vision encoder.
pub struct Gemma3Vision {
    tower: SiglipTower,
    /// Pooling kernel side.
    pool: usize,
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
        let hp = &mm.hparams;
        let pool = hp.scale_factor.unwrap_or(DEFAULT_POOL);
        let side = hp.patches_per_side();
        if pool == 0 || !side.is_multiple_of(pool) {
            return Err(VisionError::Metadata {
                key: "clip.vision.projector.scale_factor".into(),
                message: format!("pooling by {pool} does not divide {side} patches per side"),
            });
        }
        let file = &mm.file;
        let derived = Arc::new(siglip::derived_file(&[
            siglip::patch_kernel(file, hp)?,
            projection_transposed(file, hp)?,
        ])?);
        let tower = SiglipTower::load(file, &derived, hp, backend)?;
        let n = hp.n_embd;
        let mut t = |f: &Arc<ModelFile>, name: &str, cols: usize, rows: usize| {
            siglip::expect(backend.load_weight(f, name)?, name, cols, rows)
        };
        Ok(Gemma3Vision {
            soft_norm: t(file, "mm.soft_emb_norm.weight", n, 1)?,
            proj: t(&derived, PROJ, n, hp.projection_dim)?,
            tower,
            pool,
            _derived: derived,
        })
    }

    /// The tower's shape.
    pub fn hparams(&self) -> &VisionHparams {
        self.tower.hparams()
    }

    /// Embeddings per image (after pooling).
    pub fn n_tokens(&self) -> usize {
        let s = self.hparams().patches_per_side() / self.pool;
        s * s
    }

    /// Width of each embedding (the text model's).
    pub fn n_out(&self) -> usize {
        self.hparams().projection_dim
    }

    /// Unfolds a normalised planar `[3][S][S]` image into one row per patch
    /// ([`SiglipTower::unfold`]).
    pub fn unfold(&self, pixels: &[f32]) -> Result<Vec<f32>, VisionError> {
        self.tower.unfold(pixels)
    }

    /// Records the encoder over unfolded patches ([`Self::unfold`]) into a graph of one row
    /// per patch; returns the `n_tokens × n_out` embeddings.
    pub fn build(&self, g: &mut Graph, patches: Arc<[f32]>) -> TensorId {
        let hp = self.hparams();
        let side = hp.patches_per_side();
        let x = self.tower.build(g, patches);
        let x = g.avg_pool_2d(x, side, side, self.pool);
        let x = g.rms_norm(x, Some(self.soft_norm), hp.eps, hp.n_embd);
        g.matmul(self.proj, x)
    }

    /// Encodes one normalised planar `[3][S][S]` image on `backend`: `n_tokens × n_out`
    /// embeddings, row-major.
    pub fn encode(
        &self,
        backend: &mut dyn Backend,
        pixels: &[f32],
    ) -> Result<Vec<f32>, VisionError> {
        let g = self.graph(pixels)?;
        self.tower.run(backend, &g)
    }

    /// [`encode`](Self::encode) with the readback awaited (the browser's WebGPU).
    pub async fn encode_async(
        &self,
        backend: &mut dyn Backend,
        pixels: &[f32],
    ) -> Result<Vec<f32>, VisionError> {
        let g = self.graph(pixels)?;
        self.tower.run_async(backend, &g).await
    }

    /// The encoder's graph for one normalised planar `[3][S][S]` image.
    fn graph(&self, pixels: &[f32]) -> Result<Graph, VisionError> {
        let patches: Arc<[f32]> = self.unfold(pixels)?.into();
        let mut g = Graph::new(self.tower.n_patches());
        let out = self.build(&mut g, patches);
        g.output(out);
        Ok(g)
    }
}

/// The projection, stored `[proj][n_embd]` (innermost first) to be used transposed
/// (`x · W`), transposed to `proj` rows of `n_embd` in its own type (f16 in converted files,
/// as llama.cpp multiplies it).
fn projection_transposed(file: &ModelFile, hp: &VisionHparams) -> Result<Derived, VisionError> {
    let (d, n) = (hp.projection_dim, hp.n_embd);
    let (ty, es, bytes) = siglip::raw_tensor(file, PROJ, &[d as u64, n as u64])?;
    // Element (o, i) of the stored matrix is at i·d + o; the transposed one at o·n + i.
    let mut data = vec![0u8; bytes.len()];
    for i in 0..n {
        for o in 0..d {
            let src = (i * d + o) * es;
            let dst = (o * n + i) * es;
            data[dst..dst + es].copy_from_slice(&bytes[src..src + es]);
        }
    }
    Ok(Derived {
        name: PROJ.into(),
        dims: [n as u64, d as u64],
        ty,
        data,
    })
}
