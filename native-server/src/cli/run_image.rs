//! `weft run --image`: images in the prompt of a one-shot run, through the model's vision
//! projector (`--mmproj`, or the `mmproj*.gguf` beside the model), as `llama-mtmd-cli` does.
//!
//! The prompt text may hold `<__media__>` where each image goes (mtmd's marker, so the same
//! prompt works with both tools); without one, the images come first, in the order given. The
//! timings (decode, encode, prompt) are kept apart so a run can be set beside mtmd's log.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::backend_args::BackendArgs;
use crate::registry::{ProjectorFacts, Vision};
use anyhow::{bail, Context, Result};
use weft_core::engine::{Prompt, PromptPiece};
use weft_core::tokenizer::Tokenizer;
use weft_core::vision::{decode_image, DecodeLimits};

/// Where an image goes in the prompt text (llama.cpp mtmd's default marker).
pub const MARKER: &str = "<__media__>";

/// The images of a run, encoded, with the time each stage took.
pub struct ImagePrompt {
    pub prompt: Prompt,
    pub placeholder: u32,
    /// Seconds reading and decoding the files into pixels.
    pub decode_secs: f64,
    /// Seconds in the vision encoder (preprocessing, the ViT and the projector).
    pub encode_secs: f64,
    /// Positions the images take, markers included.
    pub image_tokens: usize,
}

/// The projector to use for `model`: `--mmproj`, else the one beside it.
pub fn load_vision(
    model: &Path,
    mmproj: Option<&PathBuf>,
    backend: &BackendArgs,
    tok: &Tokenizer,
    n_embd: usize,
) -> Result<Vision> {
    let facts = match mmproj {
        Some(p) => ProjectorFacts::read(p).map_err(anyhow::Error::msg)?,
        None => ProjectorFacts::beside(model, n_embd as u64).with_context(|| {
            format!(
                "--image needs a vision projector: give --mmproj FILE, or put the model's \
                 mmproj-*.gguf beside {}",
                model.display()
            )
        })?,
    };
    Vision::load(facts, backend.create()?, tok, n_embd)
}

/// `text` (rendered by the chat template, markers in it) with the image files in place of
/// their markers, encoded.
pub fn build(
    vision: &Vision,
    tok: &Tokenizer,
    text: &str,
    files: &[PathBuf],
) -> Result<ImagePrompt> {
    let segments: Vec<&str> = text.split(MARKER).collect();
    if segments.len() != files.len() + 1 {
        bail!(
            "the prompt has {} {MARKER} marker(s) for {} image(s)",
            segments.len() - 1,
            files.len()
        );
    }
    let t = Instant::now();
    let mut images = Vec::new();
    for f in files {
        let bytes = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        let img = decode_image(&bytes, &DecodeLimits::default())
            .with_context(|| format!("decoding {}", f.display()))?;
        images.push(img);
    }
    let decode_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut pieces = Vec::new();
    let mut image_tokens = 0;
    for (i, seg) in segments.iter().enumerate() {
        // Only the first segment starts the prompt (and gets the beginning-of-text token).
        let ids = match i {
            0 => tok.encode_prompt(seg, true),
            _ => tok.encode(seg, false, true),
        };
        if !ids.is_empty() {
            pieces.push(PromptPiece::Tokens(ids));
        }
        if let Some(img) = images.get(i) {
            let enc = vision
                .encode(img)
                .with_context(|| format!("encoding {}", files[i].display()))?;
            image_tokens += enc.n_tokens;
            pieces.extend(enc.pieces);
        }
    }
    Ok(ImagePrompt {
        prompt: Prompt { pieces },
        placeholder: vision.placeholder(),
        decode_secs,
        encode_secs: t.elapsed().as_secs_f64(),
        image_tokens,
    })
}

/// The user's words with a marker for every image given without one (images first).
pub fn with_markers(prompt: &str, n_images: usize) -> String {
    if prompt.contains(MARKER) {
        prompt.to_string()
    } else {
        format!("{}{prompt}", MARKER.repeat(n_images))
    }
}
