//! A scanned PDF (no text layer) as page images, for a vision model: the first
//! `--pdf-max-pages` pages rendered by `weft_media::pdf` (hayro, pure Rust) and stored as PNG
//! uploads of the same session, which the chat reads as `imagePaths` like video frames.
//!
//! Only when a model the caller may use has a vision projector; otherwise the upload keeps
//! `needsVision: true` and its warning. Bounds, as for the text layer (`pdf.rs`): the renderer
//! runs on its own thread with a large stack, shares the text parser's slots (at most two PDFs
//! at once), and the request waits at most the PDF timeout; each page's longest side is
//! [`MAX_SIDE`] pixels (so a page is at most 1536 x 1536 x 3 bytes before PNG encoding) and an
//! image embedded in the PDF over `--max-image-pixels` is refused from its dictionary.

use std::io::Cursor;

use axum::body::Bytes;
use weft_media::pdf::{render_pages, PdfOptions};

use super::pdf::PdfLimits;
use super::sniff::unreadable;
use super::store::{new_name, Meta};
use super::UploadsState;
use crate::server::auth::caller::Caller;
use crate::server::error::ApiError;

/// Longest side of a rendered page in pixels: more than any supported encoder reads (Gemma 3
/// takes 896 x 896), small enough to keep the render's memory bounded.
pub const MAX_SIDE: u32 = 1536;
/// Resolution before the [`MAX_SIDE`] cap (a US Letter page: 1275 x 1650, capped to 1187 x 1536).
const DPI: f32 = 150.0;

/// One page, ready to store as an image upload.
pub struct PageImage {
    /// The stored name (`<random>.png`).
    pub stored: String,
    pub png: Bytes,
    pub meta: Meta,
}

/// The rendered pages of a scanned PDF.
pub struct ScannedPages {
    pub pages: Vec<PageImage>,
    /// Pages in the document (more than `pages` when `--pdf-max-pages` cut it).
    pub page_count: usize,
}

/// Whether a model the caller may reach has a vision projector (the upload cannot know which
/// model the next chat request names; the chat itself refuses images on a text-only model).
pub async fn vision_served(st: &UploadsState, caller: &Caller) -> Result<bool, ApiError> {
    let scope = crate::server::inference::admission::scope(&st.inference, caller).await?;
    Ok(st.inference.registry.with_catalog(|c| {
        c.names_in(&scope)
            .iter()
            .any(|n| c.resolve(n).is_ok_and(|r| r.facts.mmproj.is_some()))
    }))
}

/// Renders the first pages of `bytes` (`name`: the client's file name, for messages and the
/// pages' display names).
pub async fn render(name: &str, bytes: Bytes, lim: &PdfLimits) -> Result<ScannedPages, ApiError> {
    let options = PdfOptions {
        max_pages: lim.max_render_pages.max(1),
        dpi: DPI,
        max_side: MAX_SIDE,
        max_image_pixels: lim.max_image_pixels,
    };
    let label = name.to_string();
    let job = move || -> Result<(Vec<Vec<u8>>, usize), weft_media::Error> {
        let pdf = render_pages(&bytes, &options)?;
        let mut pngs = Vec::with_capacity(pdf.pages.len());
        for page in &pdf.pages {
            let mut out = Cursor::new(Vec::new());
            page.write_to(&mut out, image::ImageFormat::Png)
                .map_err(|e| weft_media::Error::Corrupt(format!("encoding a page: {e}")))?;
            pngs.push(out.into_inner());
        }
        Ok((pngs, pdf.page_count))
    };
    let (pngs, page_count) = match super::pdf::on_pdf_thread(lim, job).await? {
        Some(Ok(r)) => r,
        Some(Err(weft_media::Error::TooLarge(m))) => {
            return Err(ApiError::too_large(format!("{label:?}: {m}")))
        }
        Some(Err(e)) => return Err(unreadable(format!("{label:?}: {e}"))),
        None => {
            return Err(unreadable(format!(
                "{label:?}: rendering the PDF's pages took longer than {} s; it is too complex \
                 or malformed",
                lim.timeout.as_secs()
            )))
        }
    };
    let stem = label.strip_suffix(".pdf").unwrap_or(&label);
    let mut pages = Vec::with_capacity(pngs.len());
    for (i, png) in pngs.into_iter().enumerate() {
        let stored =
            new_name("png").map_err(|e| ApiError::internal(format!("making a file name: {e}")))?;
        let meta = Meta {
            file_name: format!("{stem} page {}.png", i + 1),
            kind: "image".into(),
            media_type: "image/png".into(),
            size: png.len() as u64,
            page_count: None,
            text_pages: None,
            truncated: false,
            time_s: None,
        };
        pages.push(PageImage {
            stored,
            png: png.into(),
            meta,
        });
    }
    Ok(ScannedPages { pages, page_count })
}
