//! Safe by default on one machine: one layer, in front of authentication, that keeps web pages
//! the local user visits from driving the server.
//!
//! - `Host` must be a loopback name, the address the server is bound to, or a name given with
//!   `--allowed-host` ([`host`]): this stops DNS rebinding, where a page's own name is made
//!   to point at 127.0.0.1.
//! - A state-changing request (any method but GET, HEAD, OPTIONS) from a browser must come
//!   from this server's own pages or an origin listed with `--cors-origin` (`Origin`,
//!   `Sec-Fetch-Site`), and carry a JSON body (multipart on the upload routes) ([`origin`]):
//!   a page may send `text/plain`, a form or raw bytes anywhere without asking, but JSON only
//!   after a CORS preflight, which other origins never get an answer to.
//! - CORS is off unless `--cors-origin` lists origins ([`cors`]).
//!
//! Open mode (no keys) relies on this alone; with keys it still holds, since browsers send no
//! bearer key to another site but would send a session cookie.

mod cors;
mod host;
mod origin;

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::Response;

use self::host::AllowedHosts;
use self::origin::CorsOrigins;
use super::error::ApiError;

/// `--allowed-host` and `--cors-origin`, checked. The default answers loopback names only and
/// has CORS off.
#[derive(Clone, Debug, Default)]
pub struct SiteConfig {
    hosts: AllowedHosts,
    cors: CorsOrigins,
}

impl SiteConfig {
    /// From the flags' values and the listening address (allowed as a host name unless it is
    /// 0.0.0.0 or ::).
    pub fn new(
        allowed_hosts: &[String],
        cors_origins: &[String],
        bind: Option<IpAddr>,
    ) -> Result<SiteConfig, String> {
        Ok(SiteConfig {
            hosts: AllowedHosts::new(allowed_hosts, bind)?,
            cors: CorsOrigins::new(cors_origins)?,
        })
    }
}

/// The layer: Host, then preflight, then Origin and body type on state changes; CORS headers
/// on the way out for listed origins.
pub async fn layer(State(site): State<SiteConfig>, req: Request, next: Next) -> Response {
    let site = &site;
    let path = req.uri().path().to_owned();
    let refuse = |code: &'static str, msg: String| {
        ApiError {
            code: Some(code),
            ..ApiError::forbidden(msg)
        }
        .for_path(&path)
    };
    let host = match checked_host(&req, &site.hosts) {
        Ok(h) => h,
        Err(m) => return refuse("host_not_allowed", m),
    };
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or("null").to_owned());
    if let Some(o) = origin
        .as_deref()
        .filter(|_| cors::is_preflight(req.method(), req.headers()))
    {
        return match cors::preflight(&site.cors, o, req.headers()) {
            Ok(r) => r,
            Err(m) => refuse("cross_site_refused", m),
        };
    }
    if !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        if let Err(m) = origin::check(req.headers(), host.as_deref(), &site.cors) {
            return refuse("cross_site_refused", m);
        }
        if let Err(m) = origin::check_type(&path, req.headers()) {
            return refuse("content_type_refused", m);
        }
        if let Err(m) = super::auth::signin::check_csrf(&path, req.headers()) {
            return refuse("csrf_token_invalid", m);
        }
    }
    let mut res = next.run(req).await;
    if let Some(o) = origin.filter(|o| site.cors.allows(o)) {
        cors::decorate(&mut res, &site.cors, &o);
    }
    res
}

/// The request's host (its `Host` header, else the target's authority, as HTTP/2 sends it),
/// after checking every name it gives; None when it gives none (no browser does that).
fn checked_host(req: &Request, allowed: &AllowedHosts) -> Result<Option<String>, String> {
    let mut all = req.headers().get_all(header::HOST).iter();
    let first = all.next();
    if all.next().is_some() {
        return Err("a request may carry only one Host header".into());
    }
    let header = first
        .map(|v| {
            v.to_str()
                .map_err(|_| "the Host header is not text".to_string())
        })
        .transpose()?;
    let authority = req.uri().authority().map(|a| a.host().to_string());
    for name in header.iter().copied().chain(authority.as_deref()) {
        if !allowed.allows(name) {
            return Err(format!(
                "this server does not answer to the host name {name:?}: only loopback names \
                 (localhost, 127.0.0.1, [::1]) and the names given with --allowed-host are \
                 served (start weft serve with --allowed-host NAME to add one)"
            ));
        }
    }
    Ok(header.map(str::to_owned).or(authority))
}
