//! PDF pages into images: `render_pages(bytes, options)`, for scanned PDFs whose pages a vision
//! model reads (the server extracts a text layer itself, with `lopdf`).
//!
//! The renderer is `hayro` (pure Rust: hayro-syntax parses, vello_cpu rasterizes; no pdfium or
//! mupdf). Bounds: pages rendered are capped (`max_pages`), each page's longest side is at most
//! `max_side` pixels, and before anything is drawn every image in the file is checked from its
//! dictionary (`Width` x `Height`) so a decompression bomb inside a PDF is refused unread.
//! Rendering is not bounded in time here: the caller runs it on its own thread with a timeout, as
//! the server does for its PDF text.

use hayro::hayro_interpret::InterpreterSettings;
use hayro::hayro_syntax::object::dict::keys;
use hayro::hayro_syntax::object::{Name, Object};
use hayro::hayro_syntax::Pdf;
use hayro::vello_cpu::color::palette::css::WHITE;
use hayro::{render, PixmapSettings, RenderCache, RenderSettings};
use image::RgbImage;

use crate::error::guarded;
use crate::Error;

/// Largest `max_side` accepted.
pub const MAX_SIDE: u32 = 16384;

/// How pages are rendered.
#[derive(Clone, Debug, PartialEq)]
pub struct PdfOptions {
    /// Pages rendered, from the first (a setting of the server).
    pub max_pages: usize,
    /// Resolution in dots per inch, before the `max_side` cap.
    pub dpi: f32,
    /// Longest side of a rendered page in pixels.
    pub max_side: u32,
    /// Most pixels of any one image embedded in the file (checked before rendering).
    pub max_image_pixels: u64,
}

impl Default for PdfOptions {
    fn default() -> Self {
        PdfOptions {
            max_pages: 16,
            dpi: 150.0,
            max_side: 1536,
            max_image_pixels: 64 << 20,
        }
    }
}

/// The rendered pages and how many the file has.
#[derive(Debug)]
pub struct RenderedPdf {
    /// The first `min(page_count, max_pages)` pages, white background.
    pub pages: Vec<RgbImage>,
    pub page_count: usize,
}

impl RenderedPdf {
    /// Pages left out by `max_pages`.
    pub fn truncated(&self) -> bool {
        self.pages.len() < self.page_count
    }
}

/// Renders the first pages of a PDF.
pub fn render_pages(bytes: &[u8], options: &PdfOptions) -> Result<RenderedPdf, Error> {
    if options.max_pages == 0 {
        return Err(Error::InvalidOption("max_pages must be at least 1".into()));
    }
    if !(options.dpi > 0.0 && options.dpi.is_finite()) {
        return Err(Error::InvalidOption(format!(
            "dpi must be positive, got {}",
            options.dpi
        )));
    }
    // The renderer's pixmaps are at most 65535 pixels a side; far less is useful to a model.
    if !(1..=MAX_SIDE).contains(&options.max_side) {
        return Err(Error::InvalidOption(format!(
            "max_side must be in 1..={MAX_SIDE}, got {}",
            options.max_side
        )));
    }
    guarded("PDF", || render_guarded(bytes, options))
}

fn render_guarded(bytes: &[u8], options: &PdfOptions) -> Result<RenderedPdf, Error> {
    let pdf = Pdf::new(bytes.to_vec()).map_err(|e| match e {
        hayro::hayro_syntax::LoadPdfError::Decryption(_) => {
            Error::Corrupt("PDF is encrypted (password-protected PDFs are not rendered)".into())
        }
        hayro::hayro_syntax::LoadPdfError::Invalid => {
            Error::Corrupt("PDF could not be read".into())
        }
    })?;
    check_images(&pdf, options.max_image_pixels)?;
    let pages = pdf.pages();
    let page_count = pages.len();
    if page_count == 0 {
        return Err(Error::Corrupt("PDF has no pages".into()));
    }
    let cache = RenderCache::new();
    let interpreter = InterpreterSettings::default();
    let settings = RenderSettings::default();
    let mut rendered = Vec::new();
    for (n, page) in pages.iter().take(options.max_pages).enumerate() {
        let (width_pt, height_pt) = page.render_dimensions();
        let longest = width_pt.max(height_pt);
        if !(longest.is_finite() && longest > 0.0) {
            return Err(Error::Corrupt(format!("PDF page {} has no size", n + 1)));
        }
        // Points are 1/72 inch; the max_side cap wins over dpi for large pages.
        let scale = (options.dpi / 72.0).min(options.max_side as f32 / longest);
        let width = (width_pt * scale).round().max(1.0);
        let height = (height_pt * scale).round().max(1.0);
        // hayro sizes the pixmap as `(points * scale) as u16`, which truncates 99.9999 to 99:
        // a hundredth of a pixel more per page makes it land on the rounded size.
        let pixmap = render(
            page,
            &cache,
            &interpreter,
            &settings,
            &PixmapSettings {
                x_scale: (width + 0.01) / width_pt,
                y_scale: (height + 0.01) / height_pt,
                bg_color: WHITE,
            },
        );
        let (w, h) = (u32::from(pixmap.width()), u32::from(pixmap.height()));
        // Premultiplied RGBA over an opaque white background: alpha is 255, RGB is the colour.
        let rgb: Vec<u8> = pixmap
            .data_as_u8_slice()
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect();
        let image = RgbImage::from_raw(w.max(1), h.max(1), rgb)
            .ok_or_else(|| Error::Corrupt(format!("PDF page {} rendered empty", n + 1)))?;
        rendered.push(image);
    }
    Ok(RenderedPdf {
        pages: rendered,
        page_count,
    })
}

/// Refuses a PDF holding an image over `max_pixels`, from the image dictionaries alone.
fn check_images(pdf: &Pdf, max_pixels: u64) -> Result<(), Error> {
    for object in pdf.objects() {
        let Object::Stream(stream) = object else {
            continue;
        };
        let dict = stream.dict();
        if dict.get::<Name<'_>>(keys::SUBTYPE).as_deref() != Some(keys::IMAGE) {
            continue;
        }
        let width = dict.get::<f64>(keys::WIDTH).unwrap_or(0.0).max(0.0);
        let height = dict.get::<f64>(keys::HEIGHT).unwrap_or(0.0).max(0.0);
        if width * height > max_pixels as f64 {
            return Err(Error::TooLarge(format!(
                "PDF holds a {width}x{height} image, over the limit of {max_pixels} pixels"
            )));
        }
    }
    Ok(())
}
