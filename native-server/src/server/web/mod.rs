//! The in-browser page and the model download route, so `weft serve --model X` plus a browser
//! is all a user needs:
//!
//! - `GET /` is the chat page (server-side inference over the chat-UI protocol), embedded in
//!   the binary: `chat.rs`.
//! - `GET /play/...` serves the static page (`web/`, with the built package in `web/pkg/`,
//!   from `scripts/build-web.sh`). The directory is `$WEFT_WEB_DIR` when set, else `./web`
//!   when it holds `index.html`, else the `web/` of the source tree the binary was built from.
//!   Files are read from disk on each request (nothing is embedded: the wasm package is a build
//!   output that may not exist when the server is compiled).
//! - `GET /models` lists the served models with their download URLs; `GET|HEAD
//!   /models/{name}/file` returns the GGUF file with HTTP Range support (single ranges: 206
//!   with `Content-Range`; unsatisfiable: 416 with `Content-Range: bytes */SIZE`). Both stay
//!   within the caller's scope (a tenant's allow-list): a model out of scope is a 404, as a
//!   missing one is.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use super::auth::caller::Caller;
use super::inference::admission;
use crate::server::auth::RouterState;
use axum::extract::FromRef;
pub use state::WebState;

mod chat;
mod state;

/// Page and download routes.
pub fn routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    WebState: FromRef<S>,
{
    use crate::server::auth::{policy::Need, Routes};
    // The pages hold no data (the chat page asks for a key when its API calls answer 401).
    let pages = Router::new()
        .merge(chat::routes())
        .route("/play", get(|| async { Redirect::permanent("/play/") }))
        .route("/play/", get(|| page(String::new())))
        .route("/play/{*path}", get(|UrlPath(p): UrlPath<String>| page(p)));
    let models = Router::new()
        .route("/models", get(list))
        .route("/models/{name}/file", get(download).head(download));
    Routes::pages(Need::Public, pages).merge(Routes::pages(Need::Read, models))
}

/// Where the page's files are.
pub fn web_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WEFT_WEB_DIR") {
        return PathBuf::from(d);
    }
    let local = PathBuf::from("web");
    if local.join("index.html").is_file() {
        return local;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../web")
}

fn plain(status: StatusCode, msg: impl Into<String>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        msg.into(),
    )
        .into_response()
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "wasm" => "application/wasm",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "ts" | "md" | "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// A relative URL path as a path under the web directory; None when it tries to leave it.
fn safe_join(root: &Path, rel: &str) -> Option<PathBuf> {
    let mut out = root.to_path_buf();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

async fn page(rel: String) -> Response {
    let root = web_dir();
    let Some(mut path) = safe_join(&root, &rel) else {
        return plain(StatusCode::BAD_REQUEST, "bad path");
    };
    if path.is_dir() {
        path.push("index.html");
    }
    let p = path.clone();
    let read = tokio::task::spawn_blocking(move || std::fs::read(p))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
    match read {
        Ok(bytes) => (
            [
                (header::CONTENT_TYPE, content_type(&path)),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            bytes,
        )
            .into_response(),
        // The web directory is not named: no absolute path leaves the server.
        Err(_) if rel.starts_with("pkg/") => plain(
            StatusCode::NOT_FOUND,
            format!(
                "/play/{rel}: the browser package is not built (run scripts/build-web.sh, \
                 or set WEFT_WEB_DIR to a web directory holding pkg/)"
            ),
        ),
        Err(_) => plain(StatusCode::NOT_FOUND, format!("/play/{rel}: not found")),
    }
}

/// The name a model is downloaded by: its serving name.
fn model_url(name: &str) -> String {
    format!("/models/{name}/file")
}

/// A downloadable model.
#[derive(Serialize)]
struct WebModel {
    name: String,
    file: Option<String>,
    size: u64,
    url: String,
}

#[derive(Serialize)]
struct WebModels {
    models: Vec<WebModel>,
}

async fn list(State(st): State<WebState>, caller: Caller) -> Response {
    let scope = match admission::scope(&st.inference, &caller).await {
        Ok(s) => s,
        Err(e) => return plain(e.status, e.message),
    };
    let models = st.registry.with_catalog(|c| {
        c.names_in(&scope)
            .iter()
            .filter_map(|n| c.resolve(n).ok().map(|r| (n.clone(), r)))
            .map(|(n, r)| WebModel {
                file: r
                    .facts
                    .path
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned()),
                size: r.facts.file_size,
                url: model_url(&n),
                name: n,
            })
            .collect()
    });
    Json(WebModels { models }).into_response()
}

/// A parsed `Range` header against a file of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum RangeReq {
    /// No (usable) range: the whole file.
    Full,
    /// Bytes `start..=end`.
    Part { start: u64, end: u64 },
    /// Syntactically valid but outside the file.
    Unsatisfiable,
}

/// Parses `bytes=a-b`, `bytes=a-`, `bytes=-n`. Multiple ranges and other units are ignored
/// (the whole file is sent, which RFC 9110 allows).
pub fn parse_range(h: Option<&str>, size: u64) -> RangeReq {
    let Some(spec) = h.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return RangeReq::Full;
    };
    if spec.contains(',') {
        return RangeReq::Full;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeReq::Full;
    };
    let (a, b) = (a.trim(), b.trim());
    let num = |s: &str| s.parse::<u64>().ok();
    match (a.is_empty(), b.is_empty()) {
        // Suffix: the last n bytes.
        (true, false) => match num(b) {
            Some(0) => RangeReq::Unsatisfiable,
            Some(n) if size > 0 => RangeReq::Part {
                start: size.saturating_sub(n),
                end: size - 1,
            },
            Some(_) => RangeReq::Unsatisfiable,
            None => RangeReq::Full,
        },
        (false, _) => {
            let Some(start) = num(a) else {
                return RangeReq::Full;
            };
            let end = if b.is_empty() { Some(u64::MAX) } else { num(b) };
            match end {
                None => RangeReq::Full,
                Some(end) if end < start => RangeReq::Full,
                Some(_) if start >= size => RangeReq::Unsatisfiable,
                Some(end) => RangeReq::Part {
                    start,
                    end: end.min(size - 1),
                },
            }
        }
        (true, true) => RangeReq::Full,
    }
}

/// Streams `len` bytes of `path` from `start`, 1 MiB at a time, from a blocking thread.
fn file_body(path: PathBuf, start: u64, len: u64) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
    tokio::task::spawn_blocking(move || {
        let run = || -> std::io::Result<()> {
            let mut f = std::fs::File::open(&path)?;
            f.seek(SeekFrom::Start(start))?;
            let mut left = len;
            while left > 0 {
                let mut buf = vec![0u8; left.min(1 << 20) as usize];
                f.read_exact(&mut buf)?;
                left -= buf.len() as u64;
                if tx.blocking_send(Ok(Bytes::from(buf))).is_err() {
                    return Ok(()); // the client went away
                }
            }
            Ok(())
        };
        if let Err(e) = run() {
            let _ = tx.blocking_send(Err(e));
        }
    });
    Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }))
}

async fn download(
    State(st): State<WebState>,
    caller: Caller,
    method: Method,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    let scope = match admission::scope(&st.inference, &caller).await {
        Ok(s) => s,
        Err(e) => return plain(e.status, e.message),
    };
    // `default` names the server's default model (handy for embedding pages).
    let resolved = st.registry.with_catalog(|c| match name.as_str() {
        "default" => c
            .default_name()
            .map(|d| c.resolve_in(d, &scope))
            .unwrap_or_else(|| Err(c.unknown_in(&name, &scope))),
        n => c.resolve_in(n, &scope),
    });
    let path = match resolved {
        Ok(r) => r.facts.path.clone(),
        Err(e) => {
            let e = super::ApiError::from(e);
            return plain(e.status, format!("{} (see /models)", e.message));
        }
    };
    let file_name = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let size = match std::fs::metadata(&path) {
        Ok(m) => m.len(),
        Err(e) => {
            return plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read the model file: {e}"),
            )
        }
    };
    let range = parse_range(
        headers.get(header::RANGE).and_then(|v| v.to_str().ok()),
        size,
    );
    let disposition = format!("attachment; filename=\"{}\"", file_name.replace('"', ""));
    let (status, start, len) = match range {
        RangeReq::Full => (StatusCode::OK, 0, size),
        RangeReq::Part { start, end } => (StatusCode::PARTIAL_CONTENT, start, end - start + 1),
        RangeReq::Unsatisfiable => {
            return (
                StatusCode::RANGE_NOT_SATISFIABLE,
                [(header::CONTENT_RANGE, format!("bytes */{size}"))],
                "",
            )
                .into_response()
        }
    };
    let mut b = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, len)
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::CONTENT_DISPOSITION, disposition);
    if status == StatusCode::PARTIAL_CONTENT {
        b = b.header(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{size}", start + len - 1),
        );
    }
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        file_body(path, start, len)
    };
    b.body(body)
        .unwrap_or_else(|e| plain(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let p = |h: &str| parse_range(Some(h), 100);
        assert_eq!(p("bytes=0-9"), RangeReq::Part { start: 0, end: 9 });
        assert_eq!(p("bytes=90-"), RangeReq::Part { start: 90, end: 99 });
        assert_eq!(p("bytes=95-200"), RangeReq::Part { start: 95, end: 99 });
        assert_eq!(p("bytes=-10"), RangeReq::Part { start: 90, end: 99 });
        assert_eq!(p("bytes=-500"), RangeReq::Part { start: 0, end: 99 });
        assert_eq!(p("bytes=100-"), RangeReq::Unsatisfiable);
        assert_eq!(p("bytes=-0"), RangeReq::Unsatisfiable);
        assert_eq!(p("bytes=5-2"), RangeReq::Full);
        assert_eq!(p("bytes=0-1,5-6"), RangeReq::Full);
        assert_eq!(p("items=0-1"), RangeReq::Full);
        assert_eq!(p("bytes=x-1"), RangeReq::Full);
        assert_eq!(parse_range(None, 100), RangeReq::Full);
        assert_eq!(parse_range(Some("bytes=0-"), 0), RangeReq::Unsatisfiable);
    }

    #[test]
    fn paths_stay_inside() {
        let root = Path::new("/srv/web");
        assert_eq!(
            safe_join(root, "pkg/weft.js"),
            Some(PathBuf::from("/srv/web/pkg/weft.js"))
        );
        assert_eq!(safe_join(root, "../etc/passwd"), None);
        assert_eq!(safe_join(root, "/etc/passwd"), None);
        assert_eq!(safe_join(root, "a/../../x"), None);
    }
}
