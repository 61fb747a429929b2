//! File uploads for the chat UI: `POST /api/upload` (multipart, one or more `file` fields) and
//! `GET /uploads/{name}` (only for the principal and session that uploaded it; anyone else
//! gets the 404 of a missing file).
//!
//! - `sniff.rs`: what a file is, from its bytes (text, PDF, PNG/JPEG/GIF/WebP; executables and
//!   archives refused);
//! - `pdf_guard.rs`, `pdf.rs`, `pdf_text.rs`: a PDF's text layer, bounded in time and memory;
//! - `pdf_pages.rs`: a scanned PDF's pages as image uploads, when a vision model is served;
//! - `video.rs`: a video's sampled frames, stored as image uploads;
//! - `store.rs`: the per-session folders under `--uploads-dir`, random names;
//! - `upload.rs`, `download.rs`: the two routes; `types.rs`: their wire shapes.
//!
//! How `/api/chat` uses the files (`textFilePaths`, `imagePaths`, `isVideo`) is in
//! `ui/attachments.rs` and `ui/image_paths.rs`.

mod download;
pub mod pdf;
mod pdf_guard;
mod pdf_pages;
mod pdf_text;
pub mod sniff;
mod state;
pub mod store;
pub mod types;
mod upload;
mod video;

use std::path::PathBuf;

use crate::server::auth::RouterState;
use axum::extract::DefaultBodyLimit;
use axum::extract::FromRef;
pub use state::UploadsState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Upload settings (`weft serve --uploads-dir`, `--upload-max-file`, `--upload-max-request`).
#[derive(Clone, Debug)]
pub struct UploadConfig {
    pub dir: PathBuf,
    /// Largest file accepted, in bytes.
    pub max_file: usize,
    /// Largest total of the files in one request, in bytes.
    pub max_request: usize,
    /// Most files in one request.
    pub max_files: usize,
    pub pdf: pdf::PdfLimits,
}

impl UploadConfig {
    pub const DEFAULT_MAX_FILE: usize = 20 << 20;
    pub const DEFAULT_MAX_REQUEST: usize = 50 << 20;
    pub const DEFAULT_MAX_FILES: usize = 32;

    /// The defaults, under `dir`.
    pub fn new(dir: PathBuf) -> Self {
        UploadConfig {
            dir,
            max_file: Self::DEFAULT_MAX_FILE,
            max_request: Self::DEFAULT_MAX_REQUEST,
            max_files: Self::DEFAULT_MAX_FILES,
            pdf: pdf::PdfLimits::default(),
        }
    }
}

impl UploadConfig {
    /// The largest request body the upload route reads: the files' total plus room for the
    /// form's headers and small fields.
    pub fn body_limit(&self) -> usize {
        self.max_request
            .saturating_add(self.max_files.saturating_mul(1024))
            .saturating_add(1 << 20)
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

/// `POST /upload`, relative to `/api`. The JSON `--body-limit` is replaced by the upload's
/// own ([`UploadConfig::body_limit`], applied by the handler, which also counts each file
/// and field against its limit).
pub fn api_routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    UploadsState: FromRef<S>,
{
    crate::server::auth::Routes::user(
        OpenApiRouter::new()
            .routes(routes!(upload::upload))
            .layer(DefaultBodyLimit::disable()),
    )
}

/// `GET /uploads/{name}`, at the root.
pub fn root_routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    UploadsState: FromRef<S>,
{
    crate::server::auth::Routes::read(OpenApiRouter::new().routes(routes!(download::download)))
}
