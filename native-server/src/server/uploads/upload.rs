//! `POST /api/upload`: multipart form data with one or more `file` fields and an optional
//! `sessionId` field (or query parameter). Every file is read, checked and (for PDFs) parsed
//! before any is stored, so a request either stores all its files or none.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::multipart::{Field, MultipartError};
use axum::extract::{FromRequest, Multipart, Query, Request, State};
use axum::http::StatusCode;
use axum::Json;
use futures_util::StreamExt;

use super::sniff::{display_name, sniff, Kind};
use super::store::{new_name, Meta};
use super::types::{SessionQuery, UploadReply, UploadedFile};
use crate::server::auth::caller::Caller;
use crate::server::conversations::default_session;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::uploads::UploadsState;

/// A file as received.
struct Received {
    name: String,
    bytes: Bytes,
}

/// A file ready to store.
struct Prepared {
    stored: String,
    bytes: Bytes,
    /// The extracted text of a PDF (stored beside it).
    pdf_text: Option<String>,
    meta: Meta,
    reply: UploadedFile,
    /// A scanned PDF's pages rendered as images (stored as image uploads too).
    pages: Vec<super::pdf_pages::PageImage>,
    /// A video's frames, stored as image uploads beside it: (name, PNG bytes, metadata).
    frames: Vec<(String, Vec<u8>, Meta)>,
}

fn mib(n: usize) -> String {
    format!("{:.0} MiB", n as f64 / (1u64 << 20) as f64)
}

/// Longest `sessionId` field.
const SESSION_ID_MAX: usize = 256;
/// Longest value of a field the route does not use.
const OTHER_FIELD_MAX: usize = 4 << 10;

fn form_error(e: MultipartError, over: &AtomicBool, limit: usize) -> ApiError {
    if over.load(Ordering::Relaxed) || e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::too_large(format!(
            "the upload is larger than the {} this server accepts in one request \
             (--upload-max-request plus the form's own fields)",
            mib(limit)
        ));
    }
    ApiError::invalid(format!("reading the form: {}", e.body_text()))
}

/// The request with its body cut off after `limit` bytes (the flag says it was).
fn limited(req: Request, limit: usize) -> (Request, Arc<AtomicBool>) {
    let over = Arc::new(AtomicBool::new(false));
    let flag = over.clone();
    let req = req.map(|body| {
        let mut seen = 0usize;
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            let chunk = chunk.map_err(std::io::Error::other)?;
            seen += chunk.len();
            if seen > limit {
                flag.store(true, Ordering::Relaxed);
                return Err(std::io::Error::other("the upload is over its size limit"));
            }
            Ok(chunk)
        }))
    });
    (req, over)
}

/// Why a small field was refused: too long, or the form itself failed.
enum FieldError {
    Long(ApiError),
    Form(MultipartError),
}

impl FieldError {
    fn or_form(self, f: impl Fn(MultipartError) -> ApiError) -> PlainError {
        match self {
            FieldError::Long(e) => e.into(),
            FieldError::Form(e) => f(e).into(),
        }
    }
}

/// A text field read chunk by chunk, refused as soon as it passes `max` bytes (so a huge
/// field is never buffered).
async fn small_field(field: &mut Field<'_>, max: usize, what: &str) -> Result<String, FieldError> {
    let mut buf = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(FieldError::Form)? {
        if buf.len() + chunk.len() > max {
            return Err(FieldError::Long(ApiError::too_large(format!(
                "the form field {what:?} is longer than {max} bytes"
            ))));
        }
        buf.extend_from_slice(&chunk);
    }
    String::from_utf8(buf).map_err(|_| {
        FieldError::Long(ApiError::invalid(format!(
            "the form field {what:?} is not UTF-8 text"
        )))
    })
}

#[utoipa::path(post, path = "/upload", tag = "chat-ui", params(SessionQuery),
    request_body(content = super::types::UploadForm, content_type = "multipart/form-data"),
    responses((status = 200, body = UploadReply),
              (status = 400, body = PlainErrorBody, description = "No file, or a bad form"),
              (status = 404, body = PlainErrorBody, description = "Unknown session"),
              (status = 413, body = PlainErrorBody,
               description = "Over --upload-max-file, --upload-max-request or --upload-max-files, or a text field too long"),
              (status = 415, body = PlainErrorBody,
               description = "Not text, PDF, an image or an MP4/H.264 video (executables, archives, other video codecs and containers, named)"),
              (status = 422, body = PlainErrorBody,
               description = "A corrupt, hostile or too complex PDF or video")))]
pub async fn upload(
    State(st): State<UploadsState>,
    caller: Caller,
    Query(q): Query<SessionQuery>,
    req: Request,
) -> Result<Json<UploadReply>, PlainError> {
    let cfg = &st.uploads.cfg;
    // The route has no default body limit (the JSON limit is smaller than an upload); this
    // is its own: the files' total plus room for the form's headers and small fields.
    let (req, over) = limited(req, cfg.body_limit());
    let mut form = Multipart::from_request(req, &()).await.map_err(|e| {
        ApiError::invalid(format!(
            "send files as multipart/form-data with one or more `file` fields: {}",
            e.body_text()
        ))
    })?;
    let bad_form = |e: MultipartError| form_error(e, &over, cfg.body_limit());
    let mut session = q.session_id;
    let mut files = Vec::new();
    let mut total = 0usize;
    while let Some(mut field) = form.next_field().await.map_err(bad_form)? {
        match field.name() {
            Some("file") => {
                if files.len() == cfg.max_files {
                    return Err(ApiError::too_large(format!(
                        "one upload may hold at most {} files (--upload-max-files); \
                         send the others in another upload",
                        cfg.max_files
                    ))
                    .into());
                }
                let name = display_name(field.file_name());
                let mut buf = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(bad_form)? {
                    total += chunk.len();
                    if total > cfg.max_request {
                        return Err(ApiError::too_large(format!(
                            "the files of one upload may total at most {} \
                             (--upload-max-request); send fewer or smaller files",
                            mib(cfg.max_request)
                        ))
                        .into());
                    }
                    if buf.len() + chunk.len() > cfg.max_file {
                        return Err(ApiError::too_large(format!(
                            "{name:?} is larger than the {} a file may have \
                             (--upload-max-file)",
                            mib(cfg.max_file)
                        ))
                        .into());
                    }
                    buf.extend_from_slice(&chunk);
                }
                files.push(Received {
                    name,
                    bytes: buf.into(),
                });
            }
            Some("sessionId") => {
                let v = small_field(&mut field, SESSION_ID_MAX, "sessionId")
                    .await
                    .map_err(|e| e.or_form(bad_form))?;
                let v = v.trim();
                if !v.is_empty() {
                    session = Some(v.to_string());
                }
            }
            // Any other field is read (it must end before the next one starts) with the same
            // small limit, and dropped.
            other => {
                let what = other
                    .unwrap_or("(unnamed)")
                    .chars()
                    .take(64)
                    .collect::<String>();
                small_field(&mut field, OTHER_FIELD_MAX, &what)
                    .await
                    .map_err(|e| e.or_form(bad_form))?;
            }
        }
    }
    if files.is_empty() {
        return Err(ApiError::invalid(
            "the form has no `file` field: send files as multipart/form-data fields named file",
        )
        .into());
    }
    // Only into the caller's own sessions: another principal's id is unknown here.
    let owner = caller.owner().to_string();
    let default = default_session(&owner);
    let sid = session.unwrap_or_else(|| default.clone());
    let known = sid == default || st.sessions.exists(&owner, &sid).await?;
    if !known {
        return Err(crate::server::conversations::unknown(&sid).into());
    }
    let mut prepared = Vec::new();
    for f in files {
        prepared.push(prepare(&st, &caller, &sid, f).await?);
    }
    let store = st.uploads.store.clone();
    let mut to_write: Vec<_> = Vec::new();
    for p in &prepared {
        for (name, png, meta) in &p.frames {
            to_write.push((name.clone(), Bytes::from(png.clone()), None, meta.clone()));
        }
        to_write.push((
            p.stored.clone(),
            p.bytes.clone(),
            p.pdf_text.clone(),
            p.meta.clone(),
        ));
        for page in &p.pages {
            let (name, png, meta) = (page.stored.clone(), page.png.clone(), page.meta.clone());
            to_write.push((name, png, None, meta));
        }
    }
    let sid2 = sid.clone();
    let written = tokio::task::spawn_blocking(move || {
        for (name, bytes, text, meta) in &to_write {
            store.save(&owner, &sid2, name, bytes, text.as_deref(), meta)?;
        }
        Ok::<_, std::io::Error>(())
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?;
    written.map_err(|e| ApiError::internal(format!("storing the upload: {e}")))?;
    let files: Vec<UploadedFile> = prepared.into_iter().map(|p| p.reply).collect();
    for f in &files {
        tracing::info!(file = %f.file, kind = f.kind, size = f.size, "upload stored");
    }
    Ok(Json(UploadReply {
        first: files[0].clone(),
        files,
    }))
}

/// Sniffs, reads the text of (or renders the pages of a scanned PDF), and names one file.
async fn prepare(
    st: &UploadsState,
    caller: &Caller,
    sid: &str,
    f: Received,
) -> Result<Prepared, ApiError> {
    let kind = sniff(&f.name, &f.bytes)?;
    let stored = new_name(kind.extension(&f.name))
        .map_err(|e| ApiError::internal(format!("making a file name: {e}")))?;
    let url = format!("/uploads/{stored}?sessionId={}", query_encode(sid));
    let mut reply = UploadedFile {
        ok: true,
        file: stored.clone(),
        url,
        media_type: kind.name(),
        kind: kind.name(),
        content_type: kind.media_type(),
        file_name: f.name.clone(),
        size: f.bytes.len() as u64,
        text_content: None,
        text_length: None,
        page_count: None,
        extracted_page_count: None,
        rendered_as_images: None,
        needs_vision: false,
        warning: None,
        truncated: false,
        frames: None,
        frame_urls: None,
        frame_times: None,
    };
    let mut meta = Meta {
        file_name: f.name.clone(),
        kind: kind.name().into(),
        media_type: kind.media_type().into(),
        size: f.bytes.len() as u64,
        page_count: None,
        text_pages: None,
        truncated: false,
        time_s: None,
    };
    let mut pdf_text = None;
    let mut pages = Vec::new();
    let mut frames = Vec::new();
    match kind {
        Kind::Text => {
            let t = std::str::from_utf8(&f.bytes).unwrap_or_default();
            let t = t.strip_prefix('\u{feff}').unwrap_or(t).to_string();
            reply.text_length = Some(t.chars().count());
            reply.text_content = Some(t);
        }
        Kind::Pdf => {
            let p = super::pdf::extract(&f.name, f.bytes.clone(), &st.uploads.cfg.pdf).await?;
            reply.page_count = Some(p.page_count);
            reply.extracted_page_count = Some(p.text_pages);
            reply.rendered_as_images = Some(false);
            reply.truncated = p.truncated;
            meta.page_count = Some(p.page_count);
            meta.text_pages = Some(p.text_pages);
            meta.truncated = p.truncated;
            if p.text_pages == 0 && super::pdf_pages::vision_served(st, caller).await? {
                let cfg = &st.uploads.cfg.pdf;
                let r = super::pdf_pages::render(&f.name, f.bytes.clone(), cfg).await?;
                let url = |name: &str| format!("/uploads/{name}?sessionId={}", query_encode(sid));
                reply.rendered_as_images = Some(true);
                reply.frames = Some(r.pages.iter().map(|p| p.stored.clone()).collect());
                reply.frame_urls = Some(r.pages.iter().map(|p| url(&p.stored)).collect());
                reply.truncated = r.pages.len() < r.page_count;
                meta.truncated = reply.truncated;
                if reply.truncated {
                    reply.warning = Some(format!(
                        "only the first {} of the PDF's {} pages were rendered (--pdf-max-pages)",
                        r.pages.len(),
                        r.page_count
                    ));
                }
                reply.text_length = Some(0);
                pages = r.pages;
            } else if p.text_pages == 0 {
                reply.needs_vision = true;
                reply.warning = Some(format!(
                    "{:?} has no text layer (a scan or pictures of text): only a vision model \
                     could read it, and no model on this server has vision (restart it with \
                     one: --mmproj). Upload a PDF with selectable text, or paste its text.",
                    f.name
                ));
                reply.text_length = Some(0);
            } else {
                if p.truncated {
                    reply.warning = Some(
                        "the PDF is longer than the server reads: its text stops early".into(),
                    );
                }
                reply.text_length = Some(p.text.chars().count());
                reply.text_content = Some(p.text.clone());
                pdf_text = Some(p.text);
            }
        }
        Kind::Image(_) => {}
        Kind::Video => {
            for fr in super::video::frames(&f.name, f.bytes.clone()).await? {
                let name = new_name("png")
                    .map_err(|e| ApiError::internal(format!("making a file name: {e}")))?;
                let meta = Meta {
                    file_name: format!("{} at {:.2} s.png", f_stem(&meta.file_name), fr.time_s),
                    kind: "image".into(),
                    media_type: "image/png".into(),
                    size: fr.png.len() as u64,
                    page_count: None,
                    text_pages: None,
                    truncated: false,
                    time_s: Some(fr.time_s),
                };
                frames.push((name, fr.png, meta));
            }
            let url = |n: &str| format!("/uploads/{n}?sessionId={}", query_encode(sid));
            reply.frames = Some(frames.iter().map(|(n, ..)| n.clone()).collect());
            reply.frame_urls = Some(frames.iter().map(|(n, ..)| url(n)).collect());
            reply.frame_times = Some(
                frames
                    .iter()
                    .map(|(.., m)| m.time_s.unwrap_or(0.0))
                    .collect(),
            );
        }
    }
    Ok(Prepared {
        stored,
        bytes: f.bytes,
        pdf_text,
        meta,
        reply,
        pages,
        frames,
    })
}

/// A file name without its extension (a frame's display name starts with its video's).
fn f_stem(name: &str) -> &str {
    name.rsplit_once('.').map_or(name, |(stem, _)| stem)
}

/// Percent-encodes a query value (session ids are usually plain, but any id must round-trip).
fn query_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
