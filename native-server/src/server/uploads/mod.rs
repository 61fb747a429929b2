//! File uploads for the chat UI: `POST /api/upload` (multipart, one or more `file` fields) and
//! `GET /uploads/{name}` (only for the principal and session that uploaded it; anyone else
//! gets the 404 of a missing file).
//!
//! - `sniff.rs`: what a file is, from its bytes (text, PDF, PNG/JPEG/GIF/WebP; executables and
//!   archives refused);
//! - `pdf_guard.rs`, `pdf.rs`, `pdf_text.rs`: a PDF's text layer, bounded in time and memory;
//! - `store.rs`: the per-session folders under `--uploads-dir`, random names;
//! - `upload.rs`, `download.rs`: the two routes; `types.rs`: their wire shapes.
//!
//! How `/api/chat` uses the files (`textFilePaths`) is in `ui/attachments.rs`.

mod download;
pub mod pdf;
mod pdf_guard;
mod pdf_text;
pub mod sniff;
pub mod store;
pub mod types;
mod upload;

use std::path::PathBuf;

use axum::extract::DefaultBodyLimit;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::state::Shared;

/// Upload settings (`weft serve --uploads-dir`, `--upload-max-file`, `--upload-max-request`).
#[derive(Clone, Debug)]
pub struct UploadConfig {
    pub dir: PathBuf,
    /// Largest file accepted, in bytes.
    pub max_file: usize,
    /// Largest total of the files in one request, in bytes.
    pub max_request: usize,
    pub pdf: pdf::PdfLimits,
}

impl UploadConfig {
    pub const DEFAULT_MAX_FILE: usize = 20 << 20;
    pub const DEFAULT_MAX_REQUEST: usize = 50 << 20;

    /// The defaults, under `dir`.
    pub fn new(dir: PathBuf) -> Self {
        UploadConfig {
            dir,
            max_file: Self::DEFAULT_MAX_FILE,
            max_request: Self::DEFAULT_MAX_REQUEST,
            pdf: pdf::PdfLimits::default(),
        }
    }
}

/// The uploads of a server.
pub struct Uploads {
    pub cfg: UploadConfig,
    pub store: store::Store,
}

impl Uploads {
    pub fn new(cfg: UploadConfig) -> Self {
        let store = store::Store {
            dir: cfg.dir.clone(),
        };
        Uploads { cfg, store }
    }

    /// Removes the files of `owner`'s session (off the async workers; called when the session
    /// is deleted).
    pub async fn drop_session(&self, owner: &str, session: &str) {
        let store = self.store.clone();
        let (owner, session) = (owner.to_string(), session.to_string());
        // Awaited, so a client told the session is deleted finds its files gone.
        let _ = tokio::task::spawn_blocking(move || store.drop_session(&owner, &session)).await;
    }
}

/// `POST /upload`, relative to `/api`. The handler counts the bytes itself against the upload
/// limits, which are larger than the server's JSON `--body-limit`.
pub fn api_routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new()
        .routes(routes!(upload::upload))
        .layer(DefaultBodyLimit::disable())
}

/// `GET /uploads/{name}`, at the root.
pub fn root_routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new().routes(routes!(download::download))
}
