//! CORS, off unless `--cors-origin` lists origins: listed origins get
//! `Access-Control-Allow-Origin` on their responses and an answer to their preflights; any
//! other origin gets no CORS header at all, so its pages cannot read a response or send a
//! JSON body.

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use super::origin::CorsOrigins;

/// Headers a listed origin's script may read besides the CORS-safelisted ones.
const EXPOSE: &str = "x-request-id, x-weft-backend, retry-after, x-ab-test-id, x-ab-variant";

/// Whether the request is a CORS preflight (`OPTIONS` naming the method it wants to send).
pub fn is_preflight(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::OPTIONS
        && headers.contains_key("origin")
        && headers.contains_key("access-control-request-method")
}

/// The answer to a preflight from a listed origin: 204 with the methods and the headers it
/// asked for. Other origins get a 403 with no CORS headers (the browser then sends nothing).
pub fn preflight(
    cors: &CorsOrigins,
    origin: &str,
    headers: &HeaderMap,
) -> Result<Response, String> {
    if !cors.allows(origin) {
        return Err(format!(
            "cross-origin requests from {origin} are not allowed (start weft serve with \
             --cors-origin {origin} to allow them)"
        ));
    }
    let mut r = StatusCode::NO_CONTENT.into_response();
    let h = r.headers_mut();
    allow(h, cors, origin);
    h.insert(
        "access-control-allow-methods",
        HeaderValue::from_static("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
    );
    if let Some(asked) = headers.get("access-control-request-headers") {
        h.insert("access-control-allow-headers", asked.clone());
    }
    h.insert("access-control-max-age", HeaderValue::from_static("600"));
    h.append(
        "vary",
        HeaderValue::from_static("access-control-request-method, access-control-request-headers"),
    );
    Ok(r)
}

/// Adds the CORS headers to a response for a listed origin.
pub fn decorate(r: &mut Response, cors: &CorsOrigins, origin: &str) {
    let h = r.headers_mut();
    allow(h, cors, origin);
    h.insert(
        "access-control-expose-headers",
        HeaderValue::from_static(EXPOSE),
    );
}

fn allow(h: &mut HeaderMap, cors: &CorsOrigins, origin: &str) {
    if let Ok(v) = HeaderValue::from_str(cors.allow_value(origin)) {
        h.insert("access-control-allow-origin", v);
    }
    h.append("vary", HeaderValue::from_static("origin"));
}
