//! One vision encoder, whatever its family: loaded from an [`Mmproj`], it turns a decoded
//! image into the pieces of a prompt — the family's marker tokens around the projector's
//! rows — and says beforehand how many positions an image takes, so a caller can refuse a
//! prompt that does not fit before encoding anything.
//!
//! A family plugs in with one variant of [`VisionEncoder`] and one arm in each method: its
//! preprocessing, its encoder call and its token layout.

use std::sync::Arc;

use super::gemma3::Gemma3Vision;
use super::idefics3::Idefics3Vision;
use super::idefics3_prompt::{tile_marker, Idefics3Layout};
use super::mmproj::{Mmproj, Projector, VisionError};
use super::qwen25vl::Qwen25Vision;
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
    /// Idefics3 / SmolVLM: each tile's `<fake_token_around_image><row_R_col_C>` and rows, a
    /// newline after each row of tiles but the last, then the overview after
    /// `\n\n<fake_token_around_image><global-img>`, closed by `<fake_token_around_image>`.
    /// Rows attend causally.
    Idefics3 {
        model: Idefics3Vision,
        layout: Idefics3Layout,
        /// Each tile's marker tokens, `[row][col]`, tokenized at load for every grid the
        /// longest edge allows.
        tile_markers: Vec<Vec<Vec<u32>>>,
        placeholder: u32,
    },
    /// Qwen2.5-VL: `<|vision_start|>`, the merged-token grid (M-RoPE positions) and its rows
    /// (causal), `<|vision_end|>`.
    Qwen25VL {
        model: Qwen25Vision,
        markers: Markers,
        placeholder: u32,
    },
}

/// mtmd's limits on a Qwen2.5-VL image, in merged tokens.
const QWEN_MIN_TOKENS: u64 = 8;
const QWEN_MAX_TOKENS: u64 = 4096;

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
            Projector::Idefics3 => {
                let model = Idefics3Vision::load(mm, backend)?;
                let layout = Idefics3Layout::new(tok)?;
                let edge = model.longest_edge().ok_or_else(|| VisionError::Metadata {
                    key: "clip.vision.preproc_image_size".into(),
                    message: "missing: this mmproj predates the longest-edge tiling Weft \
                              implements (reconvert it with a newer llama.cpp converter)"
                        .into(),
                })?;
                let side = (edge as usize).div_ceil(model.tile_size().max(1));
                let tile_markers = (0..side)
                    .map(|y| {
                        (0..side)
                            .map(|x| tok.encode(&tile_marker(y, x), false, true))
                            .collect()
                    })
                    .collect();
                let placeholder = tok.token_id("<image>").or(tok.pad()).unwrap_or(0);
                Ok(VisionEncoder::Idefics3 {
                    model,
                    layout,
                    tile_markers,
                    placeholder,
                })
            }
            Projector::Qwen25VL => {
                let markers = Markers {
                    start: marker(tok, "<|vision_start|>")?,
                    end: marker(tok, "<|vision_end|>")?,
                };
                let placeholder = tok.token_id("<|image_pad|>").or(tok.pad()).unwrap_or(0);
                Ok(VisionEncoder::Qwen25VL {
                    model: Qwen25Vision::load(mm, backend)?,
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
            VisionEncoder::Idefics3 { .. } => "idefics3",
            VisionEncoder::Qwen25VL { .. } => "qwen2.5vl_merger",
        }
    }

    /// The token id standing for an image row where an id is needed (penalties' history).
    pub fn placeholder(&self) -> u32 {
        match self {
            VisionEncoder::Gemma3 { placeholder, .. }
            | VisionEncoder::Idefics3 { placeholder, .. }
            | VisionEncoder::Qwen25VL { placeholder, .. } => *placeholder,
        }
    }

    /// Positions an image of `width` x `height` takes in the prompt, markers included,
    /// without encoding it.
    pub fn n_tokens(&self, width: u32, height: u32) -> usize {
        match self {
            // Every image is fitted to one square input: a fixed count.
            VisionEncoder::Gemma3 { model, .. } => model.n_tokens() + 2,
            VisionEncoder::Idefics3 {
                model,
                tile_markers,
                ..
            } => {
                let edge = model.longest_edge().unwrap_or(0);
                let (gx, gy) =
                    crate::vision::idefics3_grid(width, height, edge, model.tile_size() as u32);
                let (gx, gy) = (gx as usize, gy as usize);
                let markers: usize = (0..gy)
                    .flat_map(|y| (0..gx).map(move |x| (y, x)))
                    .map(|(y, x)| {
                        tile_markers
                            .get(y)
                            .and_then(|r| r.get(x))
                            .map_or(2, Vec::len)
                    })
                    .sum();
                // Tiles and their markers, newlines between tile rows, then
                // `\n\n<fake><global-img>` + overview + `<fake>`.
                markers + gx * gy * model.n_tokens() + (gy - 1) + 3 + model.n_tokens() + 1
            }
            VisionEncoder::Qwen25VL { model, .. } => {
                let (rows, cols) = qwen_grid(model, width, height);
                rows * cols + 2
            }
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
                let rows = model.encode(backend, &gemma3_pixels(model, img))?;
                gemma3_image(model, *markers, rows)
            }
            VisionEncoder::Idefics3 {
                model,
                layout,
                tile_markers,
                ..
            } => {
                let image = model.encode_image(backend, img)?;
                let pieces = layout.pieces_with(&image, |y, x| {
                    tile_markers
                        .get(y)
                        .and_then(|r| r.get(x))
                        .cloned()
                        .unwrap_or_default()
                })?;
                if tile_markers.get(image.grid_y.saturating_sub(1)).is_none()
                    || tile_markers[0]
                        .get(image.grid_x.saturating_sub(1))
                        .is_none()
                {
                    return Err(VisionError::Input(format!(
                        "an image of {} x {} tiles is more than this projector's longest edge allows",
                        image.grid_x, image.grid_y
                    )));
                }
                let n_tokens = pieces
                    .iter()
                    .map(|p| match p {
                        PromptPiece::Tokens(t) => t.len(),
                        PromptPiece::Embeddings { n, .. } => *n,
                        _ => 0,
                    })
                    .sum();
                Ok(EncodedImage { pieces, n_tokens })
            }
            VisionEncoder::Qwen25VL { model, markers, .. } => {
                let hp = model.hparams();
                let align = model.align() as u32;
                let (fitted, pixels) = preprocess::qwen2vl(
                    img,
                    align,
                    QWEN_MIN_TOKENS,
                    QWEN_MAX_TOKENS,
                    hp.image_mean,
                    hp.image_std,
                );
                let (w, h) = (fitted.width as usize, fitted.height as usize);
                let grid = model.grid(w, h)?;
                let rows = model.encode(backend, &pixels.data, w, h)?;
                let n = grid.n_tokens();
                if rows.len() != n * model.n_out() {
                    return Err(VisionError::Input(format!(
                        "the encoder gave {} values for {n} rows of {}",
                        rows.len(),
                        model.n_out()
                    )));
                }
                Ok(EncodedImage {
                    pieces: vec![
                        PromptPiece::Tokens(vec![markers.start]),
                        PromptPiece::ImageGrid {
                            rows: grid.rows,
                            cols: grid.cols,
                        },
                        PromptPiece::Embeddings {
                            data: rows.into(),
                            n,
                            bidirectional: false,
                        },
                        PromptPiece::Tokens(vec![markers.end]),
                    ],
                    n_tokens: n + 2,
                })
            }
        }
    }
}

impl VisionEncoder {
    /// [`encode`](Self::encode) with the encoder's readback awaited (the browser's WebGPU
    /// cannot block). Gemma 3 so far; the other families encode synchronously here (on a CPU
    /// backend that is the same; a browser's WebGPU backend refuses it with a message).
    pub async fn encode_async(
        &self,
        backend: &mut dyn Backend,
        img: &RgbImage,
    ) -> Result<EncodedImage, VisionError> {
        match self {
            VisionEncoder::Gemma3 { model, markers, .. } => {
                let rows = model
                    .encode_async(backend, &gemma3_pixels(model, img))
                    .await?;
                gemma3_image(model, *markers, rows)
            }
            _ => self.encode(backend, img),
        }
    }
}

/// Gemma 3's encoder input: the image fitted into its square, normalised, planar.
fn gemma3_pixels(model: &Gemma3Vision, img: &RgbImage) -> Vec<f32> {
    let hp = model.hparams();
    let (_, pixels) = preprocess::gemma3(img, hp.image_size as u32, hp.image_mean, hp.image_std);
    pixels.data
}

/// Gemma 3's prompt pieces for an image's encoder output `rows`.
fn gemma3_image(
    model: &Gemma3Vision,
    markers: Markers,
    rows: Vec<f32>,
) -> Result<EncodedImage, VisionError> {
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

/// The merged-token grid (rows, columns) Qwen2.5-VL's preprocessing gives an image, from its
/// size alone.
fn qwen_grid(model: &Qwen25Vision, width: u32, height: u32) -> (usize, usize) {
    let align = model.align() as u32;
    let area = u64::from(align) * u64::from(align);
    let (w, h) = preprocess::qwen2vl_size(
        width,
        height,
        align,
        QWEN_MIN_TOKENS * area,
        QWEN_MAX_TOKENS * area,
    );
    ((h / align) as usize, (w / align) as usize)
}
