//! Ollama's blobs and `/api/create` from files, as the `ollama` client's `create_blob(path)`
//! then `create(model, files={name: digest})` use them:
//!
//! - `HEAD /api/blobs/sha256:<hex>`: 200 when the server has that blob, else 404;
//! - `POST /api/blobs/sha256:<hex>` (the raw bytes): streamed to a partial file while hashed,
//!   kept under `.weft-blobs/` in the store only when the bytes hash to the digest named
//!   (else 400, and nothing stays); 201;
//! - `POST /api/create` with `files` (a Hugging Face folder's file names → blob digests) lays
//!   the blobs out as a folder under `.weft-partial/` (hard links) and runs a convert job on
//!   it (`quantize` picks the type, F16 by default), streaming Ollama's status lines:
//!   `converting model`, progress lines with `total`/`completed`, `writing manifest`,
//!   `success` (or `{"error"}`). The folder goes when the job ends.
//!
//! Blobs outlive the create that used them (a client may create again from the same ones);
//! nothing removes them yet but deleting `.weft-blobs/`.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::{stream, StreamExt};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::ModelJobs;
use crate::jobs::JobStatus;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::jobs::JobsState;
use crate::server::stream::{json_frame, ndjson};
use crate::store::ConvertRequest;

type Res = Result<Response, PlainError>;

/// Where blobs live, inside the store.
const BLOBS_DIR: &str = ".weft-blobs";

/// The hex of a `sha256:<64 hex>` digest (lower case), or a 400 naming the form.
fn parse_digest(d: &str) -> Result<String, ApiError> {
    let hex = d
        .strip_prefix("sha256:")
        .or_else(|| d.strip_prefix("sha256-"))
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "bad digest {d:?}: expected sha256: followed by 64 hex digits"
            ))
        })?;
    Ok(hex.to_ascii_lowercase())
}

fn blob_path(jobs: &ModelJobs, hex: &str) -> PathBuf {
    jobs.store.dir.join(BLOBS_DIR).join(format!("sha256-{hex}"))
}

#[utoipa::path(head, path = "/blobs/{digest}", tag = "ollama",
    params(("digest" = String, Path, description = "sha256:<64 hex>")),
    responses((status = 200), (status = 404), (status = 400, body = PlainErrorBody)))]
pub(super) async fn blob_exists(State(st): State<JobsState>, Path(digest): Path<String>) -> Res {
    let jobs = st.jobs()?;
    let hex = parse_digest(&digest)?;
    Ok(if blob_path(jobs, &hex).is_file() {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    }
    .into_response())
}

#[utoipa::path(post, path = "/blobs/{digest}", tag = "ollama",
    params(("digest" = String, Path, description = "sha256:<64 hex> of the body")),
    request_body(content = String, description = "The file's bytes", content_type = "application/octet-stream"),
    responses((status = 201), (status = 400, body = PlainErrorBody)))]
pub(super) async fn blob_upload(
    State(st): State<JobsState>,
    Path(digest): Path<String>,
    body: Body,
) -> Res {
    let jobs = st.jobs()?.clone();
    let hex = parse_digest(&digest)?;
    let dest = blob_path(&jobs, &hex);
    if dest.is_file() {
        return Ok(StatusCode::OK.into_response());
    }
    let part = jobs
        .store
        .temp_path("blob")
        .map_err(|e| ApiError::internal(e.message))?;
    let written = write_hashed(&part, body).await;
    let got = match written {
        Ok(h) => h,
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            return Err(e.into());
        }
    };
    if got != hex {
        let _ = std::fs::remove_file(&part);
        return Err(ApiError::invalid(format!(
            "digest mismatch: the body's sha256 is {got}, not {hex}"
        ))
        .into());
    }
    let kept = std::fs::create_dir_all(dest.parent().unwrap_or(&jobs.store.dir))
        .and_then(|()| std::fs::rename(&part, &dest));
    if let Err(e) = kept {
        let _ = std::fs::remove_file(&part);
        return Err(ApiError::internal(format!("keeping the blob: {e}")).into());
    }
    Ok(StatusCode::CREATED.into_response())
}

/// Writes the body to `path`, returning its sha256 in hex.
async fn write_hashed(path: &std::path::Path, body: Body) -> Result<String, ApiError> {
    let mut file = std::fs::File::create(path)
        .map_err(|e| ApiError::internal(format!("{}: {e}", path.display())))?;
    let mut hash = Sha256::new();
    let mut chunks = body.into_data_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| ApiError::invalid(format!("reading the upload: {e}")))?;
        hash.update(&chunk);
        file.write_all(&chunk)
            .map_err(|e| ApiError::internal(format!("writing the blob: {e}")))?;
    }
    file.sync_all()
        .map_err(|e| ApiError::internal(format!("writing the blob: {e}")))?;
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// A file name a Hugging Face folder may hold: no folders, nothing hidden.
fn plain_name(n: &str) -> bool {
    !n.is_empty() && !n.starts_with('.') && !n.contains(['/', '\\', '\0']) && n.len() <= 255
}

/// `/api/create` with `files` (see the module comment).
pub async fn create_from_files(
    st: &JobsState,
    owner: &str,
    name: String,
    files: Option<Value>,
    quantize: Option<String>,
    stream: Option<bool>,
) -> Res {
    let jobs = st.jobs()?.clone();
    let files = match files {
        Some(Value::Object(m)) if !m.is_empty() => m,
        _ => {
            return Err(ApiError::invalid(
                "files must be an object of file names to blob digests (sha256:...)",
            )
            .into())
        }
    };
    let mut layout = Vec::new();
    for (file, digest) in &files {
        if !plain_name(file) {
            return Err(ApiError::invalid(format!("bad file name {file:?} in files")).into());
        }
        let d = digest
            .as_str()
            .ok_or_else(|| ApiError::invalid(format!("files.{file}: expected a digest string")))?;
        let hex = parse_digest(d)?;
        let blob = blob_path(&jobs, &hex);
        if !blob.is_file() {
            return Err(ApiError::invalid(format!(
                "unknown blob {d} for {file}: upload it first (POST /api/blobs/{d})"
            ))
            .into());
        }
        layout.push((file.clone(), blob));
    }
    let folder = jobs
        .store
        .temp_path("create")
        .map_err(|e| ApiError::internal(e.message))?;
    let laid = std::fs::create_dir_all(&folder).and_then(|()| {
        layout
            .iter()
            .try_for_each(|(f, blob)| std::fs::hard_link(blob, folder.join(f)))
    });
    if let Err(e) = laid {
        let _ = std::fs::remove_dir_all(&folder);
        return Err(ApiError::internal(format!("laying out the files: {e}")).into());
    }
    let req = ConvertRequest {
        path: folder.clone(),
        target: Some(name),
        r#type: quantize,
        threads: None,
    };
    let job = jobs.submit_convert_of(owner, req, Some(folder))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<String>(64);
    let runner = jobs.runner.clone();
    tokio::task::spawn_blocking(move || {
        let send = |v: Value| tx.blocking_send(json_frame(&v)).is_ok();
        if !send(json!({"status": "converting model"})) {
            return;
        }
        let mut seen = job.version;
        let mut last_sent = Instant::now() - Duration::from_secs(1);
        loop {
            let Some(cur) = runner.wait_change(&job.id, seen, Duration::from_secs(30)) else {
                return;
            };
            seen = cur.version;
            match cur.status {
                JobStatus::Succeeded => {
                    let _ = send(json!({"status": "writing manifest"}))
                        && send(json!({"status": "success"}));
                    return;
                }
                JobStatus::Failed | JobStatus::Cancelled => {
                    let e = cur.error.unwrap_or_else(|| "the conversion failed".into());
                    let _ = send(json!({"error": e}));
                    return;
                }
                _ => {}
            }
            // At most ten progress lines a second.
            if cur.progress.total == 0 || last_sent.elapsed() < Duration::from_millis(100) {
                continue;
            }
            last_sent = Instant::now();
            let line = json!({"status": format!("{} model", cur.phase),
                              "total": cur.progress.total, "completed": cur.progress.done});
            if !send(line) {
                return; // the client left; the job goes on
            }
        }
    });
    let lines = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|l| (l, rx)) });
    if stream.unwrap_or(true) {
        return Ok(ndjson(lines));
    }
    let all: Vec<String> = lines.collect().await;
    let last: Value = all
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| json!({"error": "the create ended without a result"}));
    if let Some(e) = last["error"].as_str() {
        return Err(ApiError::invalid(e.to_string()).into());
    }
    Ok(Json(last).into_response())
}
