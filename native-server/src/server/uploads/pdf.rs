//! A PDF's text layer, page by page (`[Page N]` markers kept), with `lopdf` (`pdf_text.rs`
//! reads each page).
//!
//! Parsing untrusted PDFs is bounded three ways: the raw bytes pass [`pdf_guard`](super::pdf_guard)
//! first (nesting, declared lengths, inflated size); the parser runs on its own thread with a
//! large stack, at most [`PARALLEL`] at once; and the request waits at most a timeout for it.
//! A parse that overruns keeps its slot until it ends, so runaway parses cannot pile up.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use tokio::sync::Semaphore;

use super::pdf_guard::{self, Refusal};
use super::sniff::unreadable;
use crate::server::error::ApiError;

/// PDF parses running at once (each on its own thread).
const PARALLEL: usize = 2;
/// The parser thread's stack: lopdf's parser recurses on nested objects, and a stack overflow
/// would end the whole server rather than the request.
const STACK: usize = 64 << 20;

/// Limits on one extraction.
#[derive(Clone, Debug)]
pub struct PdfLimits {
    pub timeout: Duration,
    /// Most bytes the compressed streams may inflate to, together.
    pub max_inflated: u64,
    /// Pages read (later pages are left out and the reply says so).
    pub max_pages: usize,
    /// Most characters of text kept.
    pub max_text: usize,
    /// Pages of a scanned PDF rendered to images for a vision model (`--pdf-max-pages`).
    pub max_render_pages: usize,
    /// Largest image embedded in a PDF that is rendered, in pixels (`--max-image-pixels`).
    pub max_image_pixels: u64,
}

impl Default for PdfLimits {
    fn default() -> Self {
        PdfLimits {
            timeout: Duration::from_secs(30),
            max_inflated: 256 << 20,
            max_pages: 2000,
            max_text: 8 << 20,
            max_render_pages: 8,
            max_image_pixels: 64 << 20,
        }
    }
}

/// What a PDF's text layer gave.
#[derive(Debug)]
pub struct PdfText {
    /// `[Page N]\n...` for every page read (empty when no page had text).
    pub text: String,
    pub page_count: usize,
    /// Pages whose text layer had any text.
    pub text_pages: usize,
    /// Stopped early (page or text limit).
    pub truncated: bool,
}

fn slots() -> Arc<Semaphore> {
    static S: OnceLock<Arc<Semaphore>> = OnceLock::new();
    S.get_or_init(|| Arc::new(Semaphore::new(PARALLEL))).clone()
}

/// Extracts the text of `bytes` (a file that starts with `%PDF-`); `name` is for messages.
pub async fn extract(name: &str, bytes: Bytes, lim: &PdfLimits) -> Result<PdfText, ApiError> {
    let lim2 = lim.clone();
    let job = move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&bytes, &lim2)))
            .unwrap_or_else(|_| Err(Refusal::Structure("the PDF parser failed on it".into())))
    };
    match on_pdf_thread(lim, job).await? {
        Some(Ok(t)) => Ok(t),
        Some(Err(Refusal::Structure(m))) => Err(unreadable(format!("{name:?}: {m}"))),
        Some(Err(Refusal::TooLarge(m))) => Err(ApiError::too_large(format!("{name:?}: {m}"))),
        None => Err(unreadable(format!(
            "{name:?}: reading the PDF took longer than {} s; it is too complex or malformed",
            lim.timeout.as_secs()
        ))),
    }
}

/// Runs `job` (parsing or rendering a PDF) on its own thread in one of the [`PARALLEL`] slots:
/// None when it overran `lim.timeout` (it keeps its slot until it ends) or failed without an
/// answer; a 503/429 when no thread or slot could be had.
pub(super) async fn on_pdf_thread<T: Send + 'static>(
    lim: &PdfLimits,
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<Option<T>, ApiError> {
    let wait = tokio::time::timeout(lim.timeout, slots().acquire_owned()).await;
    let permit = match wait {
        Ok(Ok(p)) => p,
        _ => {
            return Err(ApiError::busy(
                "the server is busy reading other PDFs; try again shortly",
            ))
        }
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("weft-pdf".into())
        .stack_size(STACK)
        .spawn(move || {
            let _permit = permit;
            let _ = tx.send(job());
        });
    if spawned.is_err() {
        return Err(ApiError::unavailable(
            "cannot start a thread to read the PDF",
        ));
    }
    match tokio::time::timeout(lim.timeout, rx).await {
        Ok(Ok(t)) => Ok(Some(t)),
        Ok(Err(_)) | Err(_) => Ok(None),
    }
}

/// The blocking part: guard, parse, then each page's text.
fn read(bytes: &[u8], lim: &PdfLimits) -> Result<PdfText, Refusal> {
    pdf_guard::check(bytes, lim.max_inflated)?;
    let doc = lopdf::Document::load_mem(bytes)
        .map_err(|e| Refusal::Structure(format!("not a readable PDF ({e})")))?;
    let pages = doc.get_pages();
    if pages.is_empty() {
        return Err(Refusal::Structure(
            "the PDF has no pages (it is corrupt or empty)".into(),
        ));
    }
    let mut out = PdfText {
        text: String::new(),
        page_count: pages.len(),
        text_pages: 0,
        truncated: pages.len() > lim.max_pages,
    };
    let mut pieces = Vec::new();
    let mut size = 0usize;
    let max_content = usize::try_from(lim.max_inflated).unwrap_or(usize::MAX);
    for (&no, &id) in pages.iter().take(lim.max_pages) {
        // A page whose content cannot be decoded counts as a page without text rather than
        // failing the whole document.
        let t = super::pdf_text::page_text(&doc, id, max_content).unwrap_or_default();
        let t = t.trim();
        if !t.is_empty() {
            out.text_pages += 1;
        }
        size += t.len();
        pieces.push(format!("[Page {no}]\n{t}"));
        if size > lim.max_text {
            out.truncated = true;
            break;
        }
    }
    if out.text_pages > 0 {
        out.text = pieces.join("\n\n");
    }
    Ok(out)
}
