//! The chat page at `/` and its assets at `/chat/...`, embedded in the binary (`web/chat/` of
//! the source tree), so an installed `weft` needs no source tree to serve it. Unlike `/play/`
//! there is no build output to wait for: the page is plain ES modules.
//!
//! Caching: the vendored libraries carry their version in their file names, so they are
//! cached for a year; the page's own files are revalidated on each load with an `ETag` (a hash
//! of the embedded bytes) so a new binary's page is picked up at once.

use std::sync::OnceLock;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use crate::server::auth::RouterState;

macro_rules! asset {
    ($path:literal) => {
        (
            $path,
            include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../web/chat/", $path)) as &[u8],
        )
    };
}

/// Every file of the page (a new file must be listed here to be served).
const ASSETS: &[(&str, &[u8])] = &[
    asset!("index.html"),
    asset!("chat.js"),
    asset!("chat.css"),
    asset!("markdown.js"),
    asset!("api.js"),
    asset!("vendor/marked-18.2.1.esm.js"),
    asset!("vendor/purify-3.5.0.es.mjs"),
    asset!("vendor/highlight-11.12.0.min.js"),
    asset!("vendor/hljs-github-11.12.0.min.css"),
    asset!("vendor/hljs-github-dark-11.12.0.min.css"),
    asset!("vendor/README.md"),
    asset!("vendor/LICENSE.marked"),
    asset!("vendor/LICENSE.dompurify"),
    asset!("vendor/LICENSE.highlightjs"),
];

/// `/`, `/chat` and `/chat/{path}`.
pub fn routes<S: RouterState>() -> Router<S> {
    Router::new()
        .route(
            "/",
            get(|h: HeaderMap| async move { serve("index.html", &h) }),
        )
        .route("/chat", get(|| async { Redirect::permanent("/") }))
        .route("/chat/", get(|| async { Redirect::permanent("/") }))
        .route(
            "/chat/{*path}",
            get(
                |axum::extract::Path(p): axum::extract::Path<String>, h: HeaderMap| async move {
                    serve(&p, &h)
                },
            ),
        )
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, e)| e).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "md" => "text/markdown; charset=utf-8",
        _ => "text/plain; charset=utf-8",
    }
}

/// FNV-1a: a cheap, stable fingerprint of each embedded file for its ETag.
fn etag(i: usize) -> &'static str {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    &TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|(_, b)| {
                let h = b.iter().fold(0xcbf29ce484222325u64, |h, &x| {
                    (h ^ x as u64).wrapping_mul(0x100000001b3)
                });
                format!("\"{h:016x}\"")
            })
            .collect()
    })[i]
}

fn serve(path: &str, h: &HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|(p, _)| *p == path) else {
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("/chat/{path}: no such file of the chat page"),
        )
            .into_response();
    };
    let tag = etag(i);
    let cache = if path.starts_with("vendor/") {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let common = [
        (header::CACHE_CONTROL, cache),
        (header::ETAG, tag),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    if h.get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag))
    {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    // The page never needs inline scripts, eval or other origins: a strict policy makes any
    // markup that slipped through sanitizing inert.
    let csp = if path.ends_with(".html") {
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
         img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
         frame-ancestors 'none'"
    } else {
        "default-src 'none'"
    };
    (
        common,
        [
            (header::CONTENT_TYPE, content_type(path)),
            (header::CONTENT_SECURITY_POLICY, csp),
        ],
        ASSETS[i].1,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_has_a_type_and_the_page_names_only_embedded_files() {
        let page = std::str::from_utf8(ASSETS[0].1).unwrap();
        for (p, _) in ASSETS {
            assert!(!content_type(p).is_empty());
        }
        for needle in page.split("/chat/").skip(1) {
            let name: String = needle
                .chars()
                .take_while(|c| !matches!(c, '"' | '\'' | '?' | ' ' | '>'))
                .collect();
            assert!(
                ASSETS.iter().any(|(p, _)| *p == name),
                "index.html refers to /chat/{name}, which is not embedded"
            );
        }
    }
}
