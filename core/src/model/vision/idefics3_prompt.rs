//! Where an Idefics3 / SmolVLM image goes in a prompt: mtmd's layout (and transformers'
//! `Idefics3Processor`'s), tile by tile with grid markers, the overview last:
//!
//! ```text
//! <fake_token_around_image><row_1_col_1>[tile]<fake_token_around_image><row_1_col_2>[tile]…\n
//! <fake_token_around_image><row_2_col_1>[tile]…<fake_token_around_image><row_R_col_C>[tile]
//! \n\n<fake_token_around_image><global-img>[overview]<fake_token_around_image>
//! ```
//!
//! (`\n` after every row but the last; no line breaks inside the layout otherwise). As mtmd
//! does, the row/column marker text is tokenized with special tokens parsed, and `\n`, `\n\n`,
//! `<fake_token_around_image>` and `<global-img>` are the lowest ids whose text is exactly that.
//! The image rows attend causally, like text (only Gemma 3's attend both ways).

use std::sync::Arc;

use super::idefics3::Idefics3Image;
use super::mmproj::VisionError;
use crate::engine::{Prompt, PromptPiece};
use crate::tokenizer::Tokenizer;

/// The fixed token ids of the layout, looked up in a model's vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Idefics3Layout {
    pub newline: u32,
    pub double_newline: u32,
    pub fake_token: u32,
    pub global_img: u32,
}

impl Idefics3Layout {
    /// Finds the layout's tokens in `tok`; an error names the first one missing (the text
    /// model is not SmolVLM's).
    pub fn new(tok: &Tokenizer) -> Result<Self, VisionError> {
        let texts = ["\n", "\n\n", "<fake_token_around_image>", "<global-img>"];
        let mut ids = [None; 4];
        for id in 0..tok.vocab_size() as u32 {
            let piece = tok.token_bytes(id, true);
            if let Some(k) = texts.iter().position(|t| t.as_bytes() == piece) {
                ids[k].get_or_insert(id);
            }
        }
        let get = |k: usize| {
            ids[k].ok_or_else(|| {
                VisionError::Input(format!(
                    "the text model's vocabulary has no {:?} token (is it SmolVLM / Idefics3's?)",
                    texts[k]
                ))
            })
        };
        Ok(Idefics3Layout {
            newline: get(0)?,
            double_newline: get(1)?,
            fake_token: get(2)?,
            global_img: get(3)?,
        })
    }

    /// The pieces of one encoded image, in the layout above.
    pub fn pieces(
        &self,
        tok: &Tokenizer,
        image: &Idefics3Image,
    ) -> Result<Vec<PromptPiece>, VisionError> {
        self.pieces_with(image, |y, x| tok.encode(&tile_marker(y, x), false, true))
    }

    /// [`pieces`](Self::pieces) with each tile's marker tokens from `marker(row, col)` (0-based),
    /// for a caller that tokenized them beforehand.
    pub fn pieces_with(
        &self,
        image: &Idefics3Image,
        marker: impl Fn(usize, usize) -> Vec<u32>,
    ) -> Result<Vec<PromptPiece>, VisionError> {
        let (gx, gy) = (image.grid_x, image.grid_y);
        if gx == 0 || gy == 0 || image.rows.len() != gx * gy + 1 {
            return Err(VisionError::Input(format!(
                "an image of {gx} x {gy} tiles needs {} blocks of embeddings (tiles and the \
                 overview), found {}",
                gx * gy + 1,
                image.rows.len()
            )));
        }
        let per = image.n_tokens * image.n_out;
        if let Some(bad) = image.rows.iter().find(|r| r.len() != per) {
            return Err(VisionError::Input(format!(
                "a tile's embeddings have {} values, expected {} x {}",
                bad.len(),
                image.n_tokens,
                image.n_out
            )));
        }
        let mut out = Vec::new();
        for y in 0..gy {
            for x in 0..gx {
                push_tokens(&mut out, &marker(y, x));
                push_rows(&mut out, &image.rows[y * gx + x], image.n_tokens);
            }
            if y + 1 < gy {
                push_tokens(&mut out, &[self.newline]);
            }
        }
        push_tokens(
            &mut out,
            &[self.double_newline, self.fake_token, self.global_img],
        );
        push_rows(&mut out, &image.rows[gx * gy], image.n_tokens);
        push_tokens(&mut out, &[self.fake_token]);
        Ok(out)
    }

    /// A whole prompt from `text` with one `marker` per image, as mtmd tokenizes it: each text
    /// part with special tokens parsed and nothing added, an image's [`pieces`](Self::pieces)
    /// at each marker, and BOS in front when the model asks for one.
    pub fn prompt(
        &self,
        tok: &Tokenizer,
        text: &str,
        marker: &str,
        images: &[Idefics3Image],
    ) -> Result<Prompt, VisionError> {
        let parts: Vec<&str> = text.split(marker).collect();
        if marker.is_empty() || parts.len() != images.len() + 1 {
            return Err(VisionError::Input(format!(
                "the prompt has {} image markers {marker:?} for {} images",
                parts.len().saturating_sub(1),
                images.len()
            )));
        }
        let mut pieces = Vec::new();
        if let (true, Some(bos)) = (tok.add_bos_default(), tok.bos()) {
            push_tokens(&mut pieces, &[bos]);
        }
        for (k, part) in parts.iter().enumerate() {
            push_tokens(&mut pieces, &tok.encode(part, false, true));
            if let Some(img) = images.get(k) {
                for p in self.pieces(tok, img)? {
                    match p {
                        PromptPiece::Tokens(t) => push_tokens(&mut pieces, &t),
                        rows => pieces.push(rows),
                    }
                }
            }
        }
        Ok(Prompt { pieces })
    }
}

/// Appends ids, to the last piece when it holds ids too (mtmd's text chunks merge so).
fn push_tokens(out: &mut Vec<PromptPiece>, ids: &[u32]) {
    if ids.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(PromptPiece::Tokens(t)) => t.extend_from_slice(ids),
        _ => out.push(PromptPiece::Tokens(ids.to_vec())),
    }
}

fn push_rows(out: &mut Vec<PromptPiece>, data: &Arc<[f32]>, n: usize) {
    out.push(PromptPiece::Embeddings {
        data: data.clone(),
        n,
        bidirectional: false,
    });
}

/// The text before tile (`y`, `x`) (0-based): `<fake_token_around_image><row_Y_col_X>`.
pub fn tile_marker(y: usize, x: usize) -> String {
    format!("<fake_token_around_image><row_{}_col_{}>", y + 1, x + 1)
}
