//! The upload route's wire shapes (field names follow the chat-UI protocol document).

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// One stored file.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UploadedFile {
    pub ok: bool,
    /// The stored name: pass it in `textFilePaths` (or `imagePaths`) of `/api/chat`.
    pub file: String,
    /// Where the owner session downloads it (`GET /uploads/{file}?sessionId=...`).
    pub url: String,
    /// `text`, `pdf`, `image` or `video` (decided from the content, not the name).
    pub media_type: &'static str,
    /// The same as `mediaType`.
    pub kind: &'static str,
    /// The MIME type it is served with.
    pub content_type: &'static str,
    /// The client's file name (last path component only).
    pub file_name: String,
    pub size: u64,
    /// Text and PDFs: the text the model reads (PDFs: `[Page N]` before each page).
    pub text_content: Option<String>,
    /// Characters in `textContent`.
    pub text_length: Option<usize>,
    /// PDFs: pages in the document, pages whose text layer had text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_count: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extracted_page_count: Option<usize>,
    /// PDFs: true when the pages were rendered to images (a scanned PDF, a vision model
    /// served): they are in `frames`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rendered_as_images: Option<bool>,
    /// A PDF without a text layer: only a vision model could read it, and none is served.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub needs_vision: bool,
    /// What the chat cannot do with this file, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// The text stops early (a page or size limit).
    pub truncated: bool,
    /// Videos: the sampled frames, stored as image uploads of the same session (pass them as
    /// `imagePaths` with `isVideo: true`), in source order. Scanned PDFs rendered for a vision
    /// model: the pages, in order (pass them as `imagePaths`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames: Option<Vec<String>>,
    /// Where the session downloads each of `frames`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame_urls: Option<Vec<String>>,
    /// Videos: each frame's time in the video, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame_times: Option<Vec<f64>>,
}

/// `POST /api/upload`: the first file's fields, plus every file in `files`.
#[derive(Debug, Serialize, ToSchema)]
pub struct UploadReply {
    #[serde(flatten)]
    pub first: UploadedFile,
    pub files: Vec<UploadedFile>,
}

/// The form of `POST /api/upload` (for the OpenAPI document).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct UploadForm {
    /// One or more files (repeat the field).
    #[schema(value_type = Vec<String>, format = Binary)]
    pub file: Vec<Vec<u8>>,
    /// The chat-UI session that owns the files (or the `sessionId` query parameter).
    #[schema(rename = "sessionId")]
    pub session_id: Option<String>,
}

/// `?sessionId=` of the upload routes.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionQuery {
    /// The chat-UI session (the default session when absent).
    #[serde(rename = "sessionId")]
    pub session_id: Option<String>,
}
