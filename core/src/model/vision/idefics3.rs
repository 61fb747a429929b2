//! Idefics3 / SmolVLM's vision encoder and connector, from its mmproj
//! (`clip.projector_type = idefics3`), recorded as a backend graph.
//!
//! An image is cut into square tiles plus an overview ([`crate::vision::idefics3`]); each of
//! them goes through the [SigLIP tower](super::siglip) on its own, then the connector: a pixel
//! shuffle by `s` (`clip.vision.projector.scale_factor`) that turns every `s × s` block of
//! patches into one token of `s²·n_embd` values — the block's patches one after the other, row
//! by row — and a linear projection without bias (`mm.model.fc.weight`) to the text model's
//! width. That is mtmd's `build_patch_merge_permute` + `build_mm`, and transformers'
//! `Idefics3Connector`.
//!
//! The shuffle is never materialised: the projection of a concatenation is the sum of the
//! projections of its parts, `W·[x₀; …; x_{s²-1}] = Σ_j W_j·x_j` with `W_j` the `j`-th block of
//! `n_embd` columns of `W`. So the graph picks, for each slot `j`, the patch row of every
//! token ([`Graph::select_rows`]) and multiplies it by `W_j` (split once at load), with ops
//! every backend already has.

use std::sync::Arc;

use super::mmproj::{Mmproj, Projector, VisionError};
use super::siglip::{self, Derived, SiglipTower};
use crate::backend::{Backend, Graph, TensorId, Weight};
use crate::gguf::ModelFile;
use crate::vision::{self, RgbImage};

/// The connector's weight in the mmproj.
const FC: &str = "mm.model.fc.weight";

/// An image through the encoder: its tile grid and the embeddings of each encoder input.
#[derive(Clone, Debug, PartialEq)]
pub struct Idefics3Image {
    /// Tiles across and down.
    pub grid_x: usize,
    pub grid_y: usize,
    /// The tiles row by row, then the overview: `n_tokens × n_out` values each, row-major.
    pub rows: Vec<Arc<[f32]>>,
    /// Embeddings per encoder input.
    pub n_tokens: usize,
    /// Width of each embedding.
    pub n_out: usize,
}

/// A loaded Idefics3 vision encoder.
pub struct Idefics3Vision {
    tower: SiglipTower,
    /// Pixel-shuffle factor.
    scale: usize,
    /// The connector split by slot (see the module doc): `s²` weights of `n_out` rows.
    fc: Vec<Weight>,
    /// `clip.vision.preproc_image_size`: the longest edge images are resized to before tiling.
    longest_edge: Option<u32>,
    /// The re-laid-out tensors (kept alive for backends that use file bytes in place).
    _derived: Arc<ModelFile>,
}

impl Idefics3Vision {
    /// Loads the encoder of `mm` into `backend`.
    pub fn load(mm: &Mmproj, backend: &mut dyn Backend) -> Result<Self, VisionError> {
        if mm.projector != Projector::Idefics3 {
            return Err(VisionError::UnsupportedProjector(format!(
                "{:?} (this loader is Idefics3's)",
                mm.projector
            )));
        }
        let hp = &mm.hparams;
        let key = "clip.vision.projector.scale_factor";
        let scale = hp.scale_factor.ok_or_else(|| VisionError::Metadata {
            key: key.into(),
            message: "missing (Idefics3's pixel shuffle needs it)".into(),
        })?;
        let side = hp.patches_per_side();
        // llama.cpp pads the patch grid with zeros up to a multiple of the factor; the
        // published models never need it, and Weft refuses it rather than guess.
        if scale < 2 || !side.is_multiple_of(scale) {
            return Err(VisionError::Metadata {
                key: key.into(),
                message: format!(
                    "a pixel shuffle by {scale} needs a factor of at least 2 that divides the \
                     {side} patches per side"
                ),
            });
        }
        let longest_edge = match mm.file.gguf.get("clip.vision.preproc_image_size") {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|v| u32::try_from(v).ok())
                    .filter(|&v| v > 0)
                    .ok_or_else(|| VisionError::Metadata {
                        key: "clip.vision.preproc_image_size".into(),
                        message: format!("expected a positive integer, found {v}"),
                    })?,
            ),
        };
        let mut derived = vec![siglip::patch_kernel(&mm.file, hp)?];
        derived.extend(fc_slots(&mm.file, hp.n_embd, scale, hp.projection_dim)?);
        let derived = Arc::new(siglip::derived_file(&derived)?);
        let mut tower = SiglipTower::load(&mm.file, &derived, hp, backend)?;
        // The f32 GELU: 3.1-3.8e-6 from transformers instead of 1.0-1.2e-3 with ggml's f16
        // table, and no farther from mtmd (whose other f16 roundings dominate; see
        // docs/vision.md).
        tower.set_f32_gelu(true);
        let fc = (0..scale * scale)
            .map(|j| {
                let name = slot_name(j);
                let w = backend.load_weight(&derived, &name)?;
                siglip::expect(w, &name, hp.n_embd, hp.projection_dim)
            })
            .collect::<Result<_, _>>()?;
        Ok(Idefics3Vision {
            tower,
            scale,
            fc,
            longest_edge,
            _derived: derived,
        })
    }

    /// The longest side images are first resized to (`clip.vision.preproc_image_size`), when
    /// the mmproj gives it.
    pub fn longest_edge(&self) -> Option<u32> {
        self.longest_edge
    }

    /// Side of a tile in pixels (the tower's input).
    pub fn tile_size(&self) -> usize {
        self.tower.hparams().image_size
    }

    /// Embeddings per tile (and for the overview).
    pub fn n_tokens(&self) -> usize {
        self.tower.n_patches() / (self.scale * self.scale)
    }

    /// Width of each embedding (the text model's).
    pub fn n_out(&self) -> usize {
        self.tower.hparams().projection_dim
    }

    /// Records the tower and the connector over one tile's unfolded patches
    /// ([`SiglipTower::unfold`]); returns the `n_tokens × n_out` embeddings.
    pub fn build(&self, g: &mut Graph, patches: Arc<[f32]>) -> TensorId {
        let x = self.tower.build(g, patches);
        let (s, side) = (self.scale, self.tower.hparams().patches_per_side());
        let out_side = side / s;
        let mut sum: Option<TensorId> = None;
        for (j, &w) in self.fc.iter().enumerate() {
            let (dy, dx) = (j / s, j % s);
            // Slot j of token (ty, tx) is patch (ty·s + dy, tx·s + dx).
            let rows: Vec<u32> = (0..out_side * out_side)
                .map(|t| {
                    let (ty, tx) = (t / out_side, t % out_side);
                    ((ty * s + dy) * side + tx * s + dx) as u32
                })
                .collect();
            let part = g.select_rows(x, rows);
            let part = g.matmul(w, part);
            sum = Some(match sum {
                None => part,
                Some(acc) => g.add(acc, part),
            });
        }
        sum.expect("the factor is at least 2, so there are slots")
    }

    /// Encodes one normalised planar `[3][S][S]` tile on `backend`: `n_tokens × n_out`
    /// embeddings, row-major.
    pub fn encode_tile(
        &self,
        backend: &mut dyn Backend,
        pixels: &[f32],
    ) -> Result<Vec<f32>, VisionError> {
        let patches: Arc<[f32]> = self.tower.unfold(pixels)?.into();
        let mut g = Graph::new(self.tower.n_patches());
        let out = self.build(&mut g, patches);
        g.output(out);
        self.tower.run(backend, &g)
    }

    /// Preprocesses `img` as mtmd does (tiles row by row, then the overview; see
    /// [`crate::vision::idefics3`]) and encodes every tile.
    pub fn encode_image(
        &self,
        backend: &mut dyn Backend,
        img: &RgbImage,
    ) -> Result<Idefics3Image, VisionError> {
        let edge = self.longest_edge.ok_or_else(|| VisionError::Metadata {
            key: "clip.vision.preproc_image_size".into(),
            message: "missing: this mmproj predates the longest-edge tiling Weft implements \
                      (reconvert it with a newer llama.cpp converter)"
                .into(),
        })?;
        let hp = self.tower.hparams();
        let (tiles, inputs) =
            vision::idefics3(img, edge, hp.image_size as u32, hp.image_mean, hp.image_std);
        let rows = inputs
            .iter()
            .map(|t| self.encode_tile(backend, &t.data).map(Arc::from))
            .collect::<Result<_, _>>()?;
        Ok(Idefics3Image {
            grid_x: tiles.grid_x as usize,
            grid_y: tiles.grid_y as usize,
            rows,
            n_tokens: self.n_tokens(),
            n_out: self.n_out(),
        })
    }
}

fn slot_name(j: usize) -> String {
    format!("{FC}.slot{j}")
}

/// The connector `[s²·n_embd → d]` (`d` rows of `s²·n_embd` values) cut into `s²` weights of
/// `d` rows of `n_embd` values: slot `j` holds columns `j·n_embd .. (j+1)·n_embd`.
fn fc_slots(
    file: &ModelFile,
    n_embd: usize,
    scale: usize,
    d: usize,
) -> Result<Vec<Derived>, VisionError> {
    let k = scale * scale;
    let (ty, es, bytes) = siglip::raw_tensor(file, FC, &[(k * n_embd) as u64, d as u64])?;
    let row = k * n_embd * es;
    Ok((0..k)
        .map(|j| {
            let mut data = Vec::with_capacity(d * n_embd * es);
            for r in bytes.chunks_exact(row) {
                data.extend_from_slice(&r[j * n_embd * es..(j + 1) * n_embd * es]);
            }
            Derived {
                name: slot_name(j),
                dims: [n_embd as u64, d as u64],
                ty,
                data,
            }
        })
        .collect())
}
