//! Vision projectors (`mmproj` GGUF files, llama.cpp's `clip` architecture): which one a
//! text model is served with, and the encoder it loads.
//!
//! A model gets a projector from `weft serve --mmproj FILE` (the default model), or from its
//! own directory: the `mmproj*.gguf` files beside it whose `clip.vision.projection_dim`
//! equals the model's embedding width are its candidates; one named after the model
//! (`mmproj-<model file stem>.gguf`, or a name one of the two stems starts with) wins, else
//! a lone candidate is used, and several unnamed ones are ambiguous (none is used, a warning
//! says so). Projector files are never served as models themselves.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use weft_core::backend::Backend;
use weft_core::gguf::ModelFile;
use weft_core::model::vision::encoder::{EncodedImage, VisionEncoder};
use weft_core::model::vision::{Mmproj, VisionError};
use weft_core::tokenizer::Tokenizer;
use weft_core::vision::RgbImage;

/// Header facts of a projector file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectorFacts {
    pub path: PathBuf,
    pub file_size: u64,
    /// `clip.projector_type`, e.g. `gemma3`.
    pub projector_type: String,
    /// Width of its output: the text model's embedding width it fits.
    pub projection_dim: u64,
}

/// Whether a file name is a projector's (`mmproj*.gguf`).
pub fn is_projector_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.to_ascii_lowercase().starts_with("mmproj") && n.ends_with(".gguf"))
}

impl ProjectorFacts {
    /// Reads the header of a projector file; the error is one line.
    pub fn read(path: &Path) -> Result<ProjectorFacts, String> {
        let shown = super::shown(path);
        let file = ModelFile::open(path).map_err(|e| format!("{shown}: {e}"))?;
        let g = &file.gguf;
        if g.architecture() != Some("clip") {
            return Err(format!("{shown} is not a vision projector (mmproj) file"));
        }
        if g.get_bool("clip.has_vision_encoder") != Some(true) {
            return Err(format!("{shown} has no vision encoder"));
        }
        let projector_type = g
            .get_str("clip.projector_type")
            .ok_or_else(|| format!("{shown} has no clip.projector_type"))?
            .to_string();
        let projection_dim = g
            .get("clip.vision.projection_dim")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| format!("{shown} has no clip.vision.projection_dim"))?;
        let file_size = std::fs::metadata(path)
            .map_err(|e| format!("{shown}: {e}"))?
            .len();
        Ok(ProjectorFacts {
            path: path.to_path_buf(),
            file_size,
            projector_type,
            projection_dim,
        })
    }

    /// The projector found beside the model at `model` of embedding width `n_embd` (the rule
    /// in this module's documentation), if any.
    pub fn beside(model: &Path, n_embd: u64) -> Option<ProjectorFacts> {
        let dir = model.parent()?;
        let stem = model.file_stem()?.to_str()?.to_ascii_lowercase();
        let mut found: Vec<ProjectorFacts> = std::fs::read_dir(dir)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| is_projector_name(p) && p.is_file())
            .filter_map(|p| ProjectorFacts::read(&p).ok())
            .filter(|f| f.projection_dim == n_embd)
            .collect();
        found.sort_by(|a, b| a.path.cmp(&b.path));
        let named = |f: &&ProjectorFacts| {
            let own = f
                .path
                .file_stem()
                .and_then(|s| s.to_str())
                .map(|s| s.to_ascii_lowercase());
            let own = own.as_deref().unwrap_or("");
            let own = own
                .trim_start_matches("mmproj")
                .trim_start_matches(['-', '_', '.']);
            !own.is_empty() && (stem.starts_with(own) || own.starts_with(&stem))
        };
        if let Some(f) = found.iter().find(named) {
            return Some(f.clone());
        }
        match found.len() {
            1 => found.pop(),
            0 => None,
            n => {
                tracing::warn!(
                    model = %model.display(),
                    candidates = n,
                    "several projectors (mmproj*.gguf) fit this model and none is named after \
                     it; serving it without vision (name one mmproj-<model>.gguf or use --mmproj)"
                );
                None
            }
        }
    }
}

/// A loaded vision encoder with its own backend; images are encoded one at a time.
pub struct Vision {
    pub facts: ProjectorFacts,
    encoder: VisionEncoder,
    backend: Mutex<Box<dyn Backend>>,
    /// The mapped file, kept while the encoder may read weights in place.
    _file: Arc<ModelFile>,
}

impl Vision {
    /// Loads the projector of `facts` for a text model with `tok` and embedding width
    /// `n_embd`, on `backend`.
    pub fn load(
        facts: ProjectorFacts,
        mut backend: Box<dyn Backend>,
        tok: &Tokenizer,
        n_embd: usize,
    ) -> anyhow::Result<Vision> {
        let shown = super::shown(&facts.path);
        let file =
            Arc::new(ModelFile::open(&facts.path).map_err(|e| anyhow::anyhow!("{shown}: {e}"))?);
        let mm = Mmproj::read(file.clone()).map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
        let encoder = VisionEncoder::load(&mm, backend.as_mut(), tok, n_embd)
            .map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
        Ok(Vision {
            facts,
            encoder,
            backend: Mutex::new(backend),
            _file: file,
        })
    }

    /// Positions an image of this size takes in a prompt.
    pub fn n_tokens(&self, width: u32, height: u32) -> usize {
        self.encoder.n_tokens(width, height)
    }

    /// The id an image row stands as where an id is needed.
    pub fn placeholder(&self) -> u32 {
        self.encoder.placeholder()
    }

    /// Encodes one image (blocking: call off the async runtime).
    pub fn encode(&self, img: &RgbImage) -> Result<EncodedImage, VisionError> {
        let mut b = self.backend.lock().unwrap_or_else(|e| e.into_inner());
        self.encoder.encode(b.as_mut(), img)
    }
}
