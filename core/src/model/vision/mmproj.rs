//! Reading an `mmproj` GGUF (llama.cpp's `clip` architecture): the vision tower's
//! hyper-parameters under `clip.vision.*` and which projector follows it
//! (`clip.projector_type`). The tensors are loaded by the projector's family file.

use std::sync::Arc;

use crate::backend::BackendError;
use crate::gguf::{ModelFile, Value};

/// Projector types (`clip.projector_type`) this crate can run.
pub const SUPPORTED_PROJECTORS: &[&str] = &["gemma3", "idefics3", "qwen2.5vl_merger"];

/// Why an mmproj could not be read or run.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum VisionError {
    #[error("not a vision projector (mmproj) file: {0}")]
    NotMmproj(String),
    #[error("projector type {0:?} is not supported yet (supported: {list})", list = SUPPORTED_PROJECTORS.join(", "))]
    UnsupportedProjector(String),
    #[error("mmproj metadata {key}: {message}")]
    Metadata { key: String, message: String },
    #[error("mmproj tensor {name}: {message}")]
    Tensor { name: String, message: String },
    #[error("image input: {0}")]
    Input(String),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// The projector after the vision tower.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Projector {
    /// Gemma 3: `k × k` average pool of the patch grid, Gemma RMSNorm, linear projection.
    Gemma3,
    /// Idefics3 / SmolVLM: pixel shuffle by `scale_factor`, linear projection (no bias).
    Idefics3,
    /// Qwen2.5-VL: 2 × 2 patch merger (RMSNorm, two-layer GELU MLP) after a windowed ViT.
    Qwen25VL,
}

/// The vision tower's shape (`clip.vision.*`).
#[derive(Clone, Debug, PartialEq)]
pub struct VisionHparams {
    /// Side of the (square) encoder input in pixels.
    pub image_size: usize,
    /// Side of a patch in pixels.
    pub patch_size: usize,
    /// Width of the tower.
    pub n_embd: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    pub n_layer: usize,
    pub n_head: usize,
    /// Norm epsilon.
    pub eps: f32,
    /// Per-channel (RGB) normalisation: `(v / 255 - mean) / std`.
    pub image_mean: [f32; 3],
    pub image_std: [f32; 3],
    /// Width of the projector output (the text model's embedding width).
    pub projection_dim: usize,
    /// `clip.use_gelu`: the feed-forward uses GELU (else another activation).
    pub use_gelu: bool,
    /// `clip.vision.projector.scale_factor`, if the file sets it.
    pub scale_factor: Option<usize>,
}

impl VisionHparams {
    /// Patches per side of the input.
    pub fn patches_per_side(&self) -> usize {
        self.image_size / self.patch_size
    }
}

/// An opened mmproj file: its projector and tower shape.
pub struct Mmproj {
    pub file: Arc<ModelFile>,
    pub projector: Projector,
    pub hparams: VisionHparams,
}

impl Mmproj {
    /// Reads and checks the metadata of `file`.
    pub fn read(file: Arc<ModelFile>) -> Result<Self, VisionError> {
        let g = &file.gguf;
        match g.architecture() {
            Some("clip") => {}
            Some(a) => {
                return Err(VisionError::NotMmproj(format!(
                    "general.architecture is {a:?}, expected \"clip\" (is this the text model \
                     instead of its mmproj-*.gguf?)"
                )))
            }
            None => {
                return Err(VisionError::NotMmproj(
                    "it has no general.architecture".into(),
                ))
            }
        }
        if g.get_bool("clip.has_vision_encoder") != Some(true) {
            return Err(VisionError::NotMmproj(
                "clip.has_vision_encoder is not true (an audio-only projector?)".into(),
            ));
        }
        let projector = match g.get_str("clip.projector_type") {
            Some("gemma3") => Projector::Gemma3,
            Some("idefics3") => Projector::Idefics3,
            Some("qwen2.5vl_merger") => Projector::Qwen25VL,
            Some(p) => return Err(VisionError::UnsupportedProjector(p.to_string())),
            None => {
                return Err(VisionError::Metadata {
                    key: "clip.projector_type".into(),
                    message: "missing".into(),
                })
            }
        };
        let hparams = VisionHparams {
            image_size: int(g, "clip.vision.image_size")?,
            patch_size: int(g, "clip.vision.patch_size")?,
            n_embd: int(g, "clip.vision.embedding_length")?,
            n_ff: int(g, "clip.vision.feed_forward_length")?,
            n_layer: int(g, "clip.vision.block_count")?,
            n_head: int(g, "clip.vision.attention.head_count")?,
            eps: float(g, "clip.vision.attention.layer_norm_epsilon")?,
            image_mean: rgb(g, "clip.vision.image_mean")?,
            image_std: rgb(g, "clip.vision.image_std")?,
            projection_dim: int(g, "clip.vision.projection_dim")?,
            use_gelu: g.get_bool("clip.use_gelu").unwrap_or(false),
            scale_factor: match g.get("clip.vision.projector.scale_factor") {
                None => None,
                Some(_) => Some(int(g, "clip.vision.projector.scale_factor")?),
            },
        };
        let h = &hparams;
        let bad = |key: &str, message: &str| VisionError::Metadata {
            key: key.into(),
            message: message.into(),
        };
        if h.patch_size == 0 || h.image_size == 0 || !h.image_size.is_multiple_of(h.patch_size) {
            return Err(bad(
                "clip.vision.patch_size",
                "must be positive and divide clip.vision.image_size",
            ));
        }
        if h.n_head == 0 || !h.n_embd.is_multiple_of(h.n_head) || h.n_embd == 0 {
            return Err(bad(
                "clip.vision.attention.head_count",
                "must be positive and divide clip.vision.embedding_length",
            ));
        }
        if h.image_std.iter().any(|&s| s == 0.0 || !s.is_finite()) {
            return Err(bad("clip.vision.image_std", "must be finite and non-zero"));
        }
        if !(h.eps > 0.0 && h.eps.is_finite()) {
            return Err(bad(
                "clip.vision.attention.layer_norm_epsilon",
                "must be positive",
            ));
        }
        Ok(Mmproj {
            file,
            projector,
            hparams,
        })
    }

    /// Names, types and dims of every tensor in the file, in file order.
    pub fn tensor_list(&self) -> Vec<(String, crate::dtype::GgmlType, Vec<u64>)> {
        self.file
            .gguf
            .tensors
            .iter()
            .map(|t| (t.name.clone(), t.ty, t.dims.clone()))
            .collect()
    }
}

fn int(g: &crate::gguf::Gguf, key: &str) -> Result<usize, VisionError> {
    let v = g.get(key).ok_or_else(|| VisionError::Metadata {
        key: key.into(),
        message: "missing".into(),
    })?;
    v.as_u64()
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| VisionError::Metadata {
            key: key.into(),
            message: format!("expected an integer, found {v}"),
        })
}

fn float(g: &crate::gguf::Gguf, key: &str) -> Result<f32, VisionError> {
    let v = g.get(key).ok_or_else(|| VisionError::Metadata {
        key: key.into(),
        message: "missing".into(),
    })?;
    v.as_f64()
        .map(|v| v as f32)
        .ok_or_else(|| VisionError::Metadata {
            key: key.into(),
            message: format!("expected a number, found {v}"),
        })
}

fn rgb(g: &crate::gguf::Gguf, key: &str) -> Result<[f32; 3], VisionError> {
    let bad = |message: String| VisionError::Metadata {
        key: key.into(),
        message,
    };
    let items = g
        .get_array(key)
        .ok_or_else(|| bad("missing or not an array".into()))?;
    let vals: Vec<f32> = items
        .iter()
        .map(|v: &Value| v.as_f64().map(|x| x as f32))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("expected numbers".into()))?;
    <[f32; 3]>::try_from(vals.as_slice())
        .map_err(|_| bad(format!("expected 3 values (RGB), found {}", vals.len())))
}
