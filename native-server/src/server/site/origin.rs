//! Who may change state from a browser: pages of this server's own origin, and the origins
//! listed with `--cors-origin`. Browsers say where a request comes from (`Origin`, and
//! `Sec-Fetch-Site` in current ones) and a page cannot forge either; clients that are not
//! browsers (curl, the SDKs) send neither and pass.

use axum::http::HeaderMap;

/// The `--cors-origin` list, normalised (lower case, no trailing slash).
#[derive(Clone, Debug, Default)]
pub struct CorsOrigins {
    /// `--cors-origin '*'`: every origin.
    any: bool,
    list: Vec<String>,
}

impl CorsOrigins {
    /// From the flag's values: `*` or `scheme://host[:port]` each.
    pub fn new(given: &[String]) -> Result<CorsOrigins, String> {
        let mut out = CorsOrigins::default();
        for g in given {
            let g = g.trim();
            if g == "*" {
                out.any = true;
                continue;
            }
            let o = g.strip_suffix('/').unwrap_or(g).to_ascii_lowercase();
            let ok = match o.split_once("://") {
                Some(("http" | "https", rest)) => {
                    !rest.contains('/') && super::host::split(rest).is_some()
                }
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "--cors-origin {g:?}: give an origin as scheme://host[:port] (no path), or *"
                ));
            }
            out.list.push(o);
        }
        Ok(out)
    }

    /// Whether pages of `origin` may call this server. The opaque origin `null` (sandboxed
    /// frames, `file:` pages) is never listed, even by `*`.
    pub fn allows(&self, origin: &str) -> bool {
        origin != "null" && (self.any || self.list.contains(&origin.to_ascii_lowercase()))
    }

    /// The `Access-Control-Allow-Origin` value for a listed origin (`*` when every origin is
    /// allowed, so a browser never sends credentials with it).
    pub fn allow_value<'a>(&self, origin: &'a str) -> &'a str {
        if self.any {
            "*"
        } else {
            origin
        }
    }
}

/// Whether `origin` is this server as the browser reached it (`host` is the request's `Host`):
/// `http://HOST`, or `https://HOST` behind a proxy that ends TLS and keeps `Host`.
fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let Some(host) = host else { return false };
    let o = origin.to_ascii_lowercase();
    let h = host.trim().to_ascii_lowercase();
    o.strip_prefix("http://")
        .or_else(|| o.strip_prefix("https://"))
        .is_some_and(|rest| rest == h)
}

/// Refuses a state-changing request a browser sent for a page of another origin.
pub fn check(headers: &HeaderMap, host: Option<&str>, cors: &CorsOrigins) -> Result<(), String> {
    let origin = headers.get("origin").map(|v| v.to_str().unwrap_or("null"));
    if let Some(o) = origin {
        if cors.allows(o) {
            return Ok(());
        }
        if !same_origin(o, host) {
            return Err(format!(
                "cross-origin request refused: a page of {o} may not change this server's \
                 state (start weft serve with --cors-origin {o} to allow that origin)"
            ));
        }
    }
    let fetch_site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase());
    match fetch_site.as_deref() {
        // `same-site` is another origin of the same site (another port of 127.0.0.1, say).
        Some("cross-site" | "same-site") => Err(format!(
            "cross-site request refused (Sec-Fetch-Site: {}): only this server's own pages and \
             origins listed with --cors-origin may change its state",
            fetch_site.unwrap_or_default()
        )),
        _ => Ok(()),
    }
}

/// The content types a state-changing request to `path` may carry: JSON everywhere (a page
/// can send JSON to another origin only after a CORS preflight the server answers), and the
/// upload routes' own bodies where they take them.
fn accepted(path: &str) -> Option<&'static [&'static str]> {
    const JSON: &[&str] = &["application/json"];
    const FORM: &[&str] = &["application/json", "multipart/form-data"];
    const RESTORE: &[&str] = &[
        "application/json",
        "multipart/form-data",
        "application/zip",
        "application/octet-stream",
    ];
    match path {
        "/api/upload" | "/api/skills" => Some(FORM),
        "/api/v1/backup/restore" => Some(RESTORE),
        // Ollama's blob upload: raw bytes, which its client sends with no type at all.
        p if p.starts_with("/api/blobs/") => None,
        _ => Some(JSON),
    }
}

/// Whether the request has a body (a `Content-Length` above 0, or a chunked one).
fn has_body(headers: &HeaderMap) -> bool {
    if headers.contains_key("transfer-encoding") {
        return true;
    }
    headers
        .get("content-length")
        .is_some_and(|v| v.to_str().map_or(true, |v| v.trim() != "0"))
}

/// Refuses a state-changing request whose body is of a type a page could send to another
/// origin without asking (`text/plain`, a form, no type at all).
pub fn check_type(path: &str, headers: &HeaderMap) -> Result<(), String> {
    let Some(accepted) = accepted(path) else {
        return Ok(());
    };
    let media = headers.get("content-type").map(|v| {
        v.to_str()
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    match media {
        None if !has_body(headers) => Ok(()),
        Some(m) if accepted.contains(&m.as_str()) => Ok(()),
        m => Err(format!(
            "this request needs Content-Type: {} (got {})",
            accepted.join(" or "),
            m.map_or_else(|| "none".to_string(), |m| format!("{m:?}"))
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    fn cors(list: &[&str]) -> CorsOrigins {
        CorsOrigins::new(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn same_origin_and_header_less_requests_pass() {
        let none = cors(&[]);
        let host = Some("127.0.0.1:8080");
        assert!(check(&headers(&[]), host, &none).is_ok());
        let own = headers(&[
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert!(check(&own, host, &none).is_ok());
        assert!(check(&headers(&[("sec-fetch-site", "none")]), host, &none).is_ok());
        let proxied = headers(&[("origin", "https://weft.example")]);
        assert!(check(&proxied, Some("weft.example"), &none).is_ok());
    }

    #[test]
    fn foreign_origins_are_refused_unless_listed() {
        let host = Some("127.0.0.1:8080");
        for h in [
            headers(&[("origin", "http://attacker.example")]),
            headers(&[("origin", "http://127.0.0.1:9000")]),
            headers(&[("origin", "http://localhost:8080")]),
            headers(&[("origin", "null")]),
            headers(&[("sec-fetch-site", "cross-site")]),
            headers(&[("sec-fetch-site", "same-site")]),
            headers(&[
                ("origin", "http://127.0.0.1:8080"),
                ("sec-fetch-site", "cross-site"),
            ]),
        ] {
            assert!(check(&h, host, &cors(&[])).is_err(), "{h:?}");
        }
        let listed = headers(&[
            ("origin", "http://app.example:3000"),
            ("sec-fetch-site", "cross-site"),
        ]);
        assert!(check(&listed, host, &cors(&["http://app.example:3000/"])).is_ok());
        assert!(check(&listed, host, &cors(&["*"])).is_ok());
        assert!(check(&headers(&[("origin", "null")]), host, &cors(&["*"])).is_err());
    }

    #[test]
    fn only_json_bodies_outside_the_upload_routes() {
        let post = |path: &str, h: &[(&'static str, &str)]| check_type(path, &headers(h));
        assert!(post("/api/v1/keys", &[("content-type", "application/json")]).is_ok());
        assert!(post(
            "/api/v1/keys",
            &[("content-type", "Application/JSON; charset=utf-8")]
        )
        .is_ok());
        assert!(post("/api/v1/keys", &[("content-type", "text/plain")]).is_err());
        assert!(post(
            "/api/v1/keys",
            &[("content-type", "application/x-www-form-urlencoded")]
        )
        .is_err());
        assert!(post("/api/v1/keys", &[("content-length", "12")]).is_err());
        assert!(post("/api/v1/keys", &[("transfer-encoding", "chunked")]).is_err());
        // Bodiless: curl -X POST, the page's "new session".
        assert!(post("/api/sessions", &[]).is_ok());
        assert!(post("/api/sessions", &[("content-length", "0")]).is_ok());
        let form = [("content-type", "multipart/form-data; boundary=x")];
        assert!(post("/api/upload", &form).is_ok());
        assert!(post("/api/skills", &form).is_ok());
        assert!(post("/api/v1/keys", &form).is_err());
        assert!(post(
            "/api/v1/backup/restore",
            &[("content-type", "application/zip")]
        )
        .is_ok());
        assert!(post("/api/upload", &[("content-type", "text/plain")]).is_err());
        assert!(post("/api/blobs/sha256:ab", &[("content-length", "3")]).is_ok());
    }

    #[test]
    fn malformed_cors_origins_are_errors() {
        for bad in ["", "example.com", "ftp://x", "http://x/path", "http://"] {
            assert!(CorsOrigins::new(&[bad.to_string()]).is_err(), "{bad}");
        }
    }
}
