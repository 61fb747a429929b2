//! One vision encoder, whatever its family: loaded from an [`Mmproj`], it turns a decoded
//! image into the pieces of a prompt — the family's marker tokens around the projector's
//! rows — and says beforehand how many positions an image takes, so a caller can refuse a
//! prompt that does not fit before encoding anything.
//!
//! A family plugs in with one variant of [`VisionEncoder`] and one arm in each method: its
//! preprocessing, its encoder call and its token layout.

use std::sync::Arc;

use super::gemma3::Gemma3Vision;
use super::mmproj::{Mmproj, Projector, VisionError};
use crate::backend::Backend;
use crate::engine::PromptPiece;
use crate::tokenizer::Tokenizer;
use crate::vision::{preprocess, RgbImage};

/// An image as prompt pieces.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodedImage {
    /// Marker tokens and embedding rows, in prompt order.
    pub pieces: Vec<PromptPiece>,
    /// Positions the pieces take (markers included): what the image counts in `usage`.
    pub n_tokens: usize,
}

/// Gemma 3's marker tokens around an image's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Markers {
    pub start: u32,
    pub end: u32,
}

/// A loaded vision encoder of one family.
pub enum VisionEncoder {
    /// Gemma 3: `<start_of_image>`, 256 rows attending to each other both ways,
    /// `<end_of_image>` (as llama.cpp's mtmd lays it out).
    Gemma3 {
        model: Gemma3Vision,
        markers: Markers,
        placeholder: u32,
    },
}

/// Looks up a token the text model must have for this projector.
fn marker(tok: &Tokenizer, text: &str) -> Result<u32, VisionError> {
    tok.token_id(text).ok_or_else(|| {
        VisionError::Input(format!(
            "the text model's vocabulary has no {text} token: this projector does not belong \
             to it"
        ))
    })
}

impl VisionEncoder {
    /// Loads the encoder of `mm` into `backend`, for a text model with this tokenizer and
    /// embedding width `n_embd` (the projector's output must be as wide).
    pub fn load(
        mm: &Mmproj,
        backend: &mut dyn Backend,
        tok: &Tokenizer,
        n_embd: usize,
    ) -> Result<Self, VisionError> {
        if mm.hparams.projection_dim != n_embd {
            return Err(VisionError::Metadata {
                key: "clip.vision.projection_dim".into(),
                message: format!(
                    "{} does not match the text model's embedding width {n_embd}",
                    mm.hparams.projection_dim
                ),
            });
        }
        match mm.projector {
            Projector::Gemma3 => {
                let markers = Markers {
                    start: marker(tok, "<start_of_image>")?,
                    end: marker(tok, "<end_of_image>")?,
                };
                let placeholder = tok
                    .token_id("<image_soft_token>")
                    .or(tok.pad())
                    .unwrap_or(0);
                Ok(VisionEncoder::Gemma3 {
                    model: Gemma3Vision::load(mm, backend)?,
                    markers,
                    placeholder,
                })
            }
        }
    }

    /// The projector type, as `clip.projector_type` names it.
    pub fn projector_type(&self) -> &'static str {
        match self {
            VisionEncoder::Gemma3 { .. } => "gemma3",
        }
    }

    /// The token id standing for an image row where an id is needed (penalties' history).
    pub fn placeholder(&self) -> u32 {
        match self {
            VisionEncoder::Gemma3 { placeholder, .. } => *placeholder,
        }
    }

    /// Positions an image of `width` x `height` takes in the prompt, markers included,
    /// without encoding it.
    pub fn n_tokens(&self, _width: u32, _height: u32) -> usize {
        match self {
            // Every image is fitted to one square input: a fixed count.
            VisionEncoder::Gemma3 { model, .. } => model.n_tokens() + 2,
        }
    }

    /// Preprocesses and encodes `img` on `backend` into prompt pieces.
    pub fn encode(
        &self,
        backend: &mut dyn Backend,
        img: &RgbImage,
    ) -> Result<EncodedImage, VisionError> {
        match self {
            VisionEncoder::Gemma3 { model, markers, .. } => {
                let hp = model.hparams();
                let (_, pixels) =
                    preprocess::gemma3(img, hp.image_size as u32, hp.image_mean, hp.image_std);
                let rows = model.encode(backend, &pixels.data)?;
                let n = model.n_tokens();
                if rows.len() != n * model.n_out() {
                    return Err(VisionError::Input(format!(
                        "the encoder gave {} values for {n} rows of {}",
                        rows.len(),
                        model.n_out()
                    )));
                }
                let data: Arc<[f32]> = rows.into();
                Ok(EncodedImage {
                    pieces: vec![
                        PromptPiece::Tokens(vec![markers.start]),
                        PromptPiece::Embeddings {
                            data,
                            n,
                            bidirectional: true,
                        },
                        PromptPiece::Tokens(vec![markers.end]),
                    ],
                    n_tokens: n + 2,
                })
            }
        }
    }
}
