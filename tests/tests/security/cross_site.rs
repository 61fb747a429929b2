//! Cross-site requests and DNS rebinding (issue failure 3): with no key configured (open mode,
//! the default on loopback) a `text/plain` POST from a foreign `Origin` created an admin key or
//! started a pull, and `Host: attacker.example` was served. Each case is the attack itself over
//! real HTTP, in open mode and in keyed mode, then the state is read back (no key made, no
//! job). `browser/` has the same attacks from a page in headless Chromium.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;
use weft_tests::{Response, Server};

use crate::harness::{call, Db};
use crate::on_both;

mod browser;
mod login;

/// Sends one request with exactly these headers (the shared client always adds its own
/// `Host: 127.0.0.1`, and a second Host header is a different attack).
fn raw(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Response {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    req.push_str(body.unwrap_or(""));
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    Response::parse(&out)
}

/// What a browser attaches to a request a page of `origin` sends to this server.
struct Page<'a> {
    host: String,
    origin: &'a str,
    fetch_site: &'a str,
}

impl Page<'_> {
    fn send(
        &self,
        port: u16,
        method: &str,
        path: &str,
        ctype: Option<&str>,
        body: Option<&str>,
        key: &str,
    ) -> Response {
        let auth = format!("Bearer {key}");
        let mut h = vec![("Host", self.host.as_str())];
        if !self.origin.is_empty() {
            h.push(("Origin", self.origin));
        }
        if !self.fetch_site.is_empty() {
            h.push(("Sec-Fetch-Site", self.fetch_site));
        }
        if let Some(c) = ctype {
            h.push(("Content-Type", c));
        }
        if !key.is_empty() {
            h.push(("Authorization", &auth));
        }
        raw(port, method, path, &h, body)
    }
}

/// The number of keys the server holds (read with `key` as a plain curl-like client).
fn key_count(s: &Server, key: &str) -> usize {
    let r = call(&s.client(), key, "GET", "/api/v1/keys", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["data"].as_array().expect("data").len()
}

/// The number of model jobs the server knows.
fn job_count(s: &Server, key: &str) -> usize {
    let r = call(&s.client(), key, "GET", "/api/v1/jobs", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["jobs"].as_array().expect("jobs").len()
}

/// The refusal's message, whatever the surface's error shape.
fn message(r: &Response) -> String {
    let j: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
    j["error"]
        .as_str()
        .or_else(|| j["error"]["message"].as_str())
        .unwrap_or(&r.body)
        .to_string()
}

const NEW_KEY: &str = r#"{"name":"csrf","role":"admin"}"#;
const PULL: &str = r#"{"model":"hf.co/attacker/model:Q4_0","stream":false}"#;

/// Every way a foreign page (or a rebinding one) tries to make a key or start a pull; each
/// must be refused with a 403 before it reaches a handler, whether or not `key` is valid.
fn attacks_are_refused(s: &Server, key: &str) {
    let port = s.port;
    let own = format!("127.0.0.1:{port}");
    let foreign = Page {
        host: own.clone(),
        origin: "http://attacker.example",
        fetch_site: "cross-site",
    };
    // Another server on this machine (a dev server, a compromised local page).
    let neighbour_origin = format!("http://127.0.0.1:{}", port.wrapping_add(1).max(1));
    let neighbour = Page {
        host: own.clone(),
        origin: &neighbour_origin,
        fetch_site: "same-site",
    };
    // Older browsers send Origin without Sec-Fetch-*; a sandboxed frame sends `null`.
    let origin_only = Page {
        host: own.clone(),
        origin: "http://attacker.example",
        fetch_site: "",
    };
    let null_origin = Page {
        host: own.clone(),
        origin: "null",
        fetch_site: "cross-site",
    };
    let fetch_site_only = Page {
        host: own.clone(),
        origin: "",
        fetch_site: "cross-site",
    };
    // DNS rebinding: the page's own name now points at 127.0.0.1, so it is "same-origin".
    let rebound_host = format!("attacker.example:{port}");
    let rebound_origin = format!("http://{rebound_host}");
    let rebound = Page {
        host: rebound_host.clone(),
        origin: &rebound_origin,
        fetch_site: "same-origin",
    };
    let keys_before = key_count(s, key);
    let jobs_before = job_count(s, key);
    let cases: Vec<(&str, &Page, Option<&str>)> = vec![
        ("foreign text/plain", &foreign, Some("text/plain")),
        (
            "foreign form",
            &foreign,
            Some("application/x-www-form-urlencoded"),
        ),
        (
            "foreign multipart",
            &foreign,
            Some("multipart/form-data; boundary=x"),
        ),
        ("foreign blob (no type)", &foreign, None),
        (
            "foreign JSON (no preflight)",
            &foreign,
            Some("application/json"),
        ),
        ("neighbour port text/plain", &neighbour, Some("text/plain")),
        ("neighbour port JSON", &neighbour, Some("application/json")),
        ("Origin only", &origin_only, Some("text/plain")),
        ("Origin null", &null_origin, Some("text/plain")),
        (
            "Sec-Fetch-Site cross-site JSON",
            &fetch_site_only,
            Some("application/json"),
        ),
        ("rebound text/plain", &rebound, Some("text/plain")),
        ("rebound JSON", &rebound, Some("application/json")),
    ];
    for (what, page, ctype) in &cases {
        for (path, body) in [("/api/v1/keys", NEW_KEY), ("/api/pull", PULL)] {
            let r = page.send(port, "POST", path, *ctype, Some(body), key);
            assert_eq!(r.status, 403, "{what} POST {path}: {} {}", r.status, r.body);
            assert!(
                r.header("access-control-allow-origin").is_none(),
                "{what}: {:?}",
                r.headers
            );
        }
    }
    // A text/plain body with no browser headers at all is refused too (so a browser that
    // sends neither header gains nothing).
    let plain = raw(
        port,
        "POST",
        "/api/v1/keys",
        &[("Host", &own), ("Content-Type", "text/plain")],
        Some(NEW_KEY),
    );
    assert_eq!(plain.status, 403, "{}", plain.body);
    assert!(
        message(&plain).contains("application/json"),
        "{}",
        plain.body
    );
    // Rebinding: reads are refused as well, on every surface, with a message naming the flag.
    for (method, path) in [
        ("GET", "/"),
        ("GET", "/api/v1/keys"),
        ("GET", "/api/tags"),
        ("GET", "/v1/models"),
        ("DELETE", "/api/v1/keys/x"),
    ] {
        for host in [
            "attacker.example",
            rebound_host.as_str(),
            "127.0.0.1.attacker.example",
        ] {
            let r = rebound_send(port, method, path, host, key);
            assert_eq!(r.status, 403, "Host {host}: {method} {path}: {}", r.body);
            assert!(message(&r).contains("--allowed-host"), "{}", r.body);
        }
    }
    assert_eq!(
        key_count(s, key),
        keys_before,
        "a refused request made a key"
    );
    assert_eq!(
        job_count(s, key),
        jobs_before,
        "a refused request started a job"
    );
    // Preflights from a foreign origin get no CORS answer (CORS is off by default).
    let pre = raw(
        port,
        "OPTIONS",
        "/api/v1/keys",
        &[
            ("Host", &own),
            ("Origin", "http://attacker.example"),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "content-type, authorization",
            ),
        ],
        None,
    );
    assert!(pre.status >= 400, "{} {}", pre.status, pre.body);
    assert!(
        pre.header("access-control-allow-origin").is_none(),
        "{:?}",
        pre.headers
    );
    // A foreign page's GET reaches the server (it is not a state change) but its script may
    // not read the answer.
    let get = foreign.send(port, "GET", "/api/v1/about", None, None, key);
    assert!(
        get.header("access-control-allow-origin").is_none(),
        "{:?}",
        get.headers
    );
}

fn rebound_send(port: u16, method: &str, path: &str, host: &str, key: &str) -> Response {
    let auth = format!("Bearer {key}");
    let mut h = vec![("Host", host)];
    if !key.is_empty() {
        h.push(("Authorization", &auth));
    }
    raw(port, method, path, &h, None)
}

/// What must keep working: the server's own pages (by 127.0.0.1, localhost and [::1]) and
/// clients that are not browsers. Returns the key the last request made.
fn own_pages_and_clients_pass(s: &Server, key: &str) -> String {
    let port = s.port;
    let before = key_count(s, key);
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let origin = format!("http://{host}");
        let own = Page {
            host: host.clone(),
            origin: &origin,
            fetch_site: "same-origin",
        };
        // The page's own calls: a bodiless POST (new session) and a JSON one.
        let r = own.send(port, "POST", "/api/sessions", None, None, key);
        assert!(
            r.status < 300,
            "{host}: POST /api/sessions: {} {}",
            r.status,
            r.body
        );
        let r = own.send(
            port,
            "POST",
            "/api/show",
            Some("application/json"),
            Some(r#"{"model":"smol"}"#),
            key,
        );
        assert_eq!(r.status, 200, "{host}: POST /api/show: {}", r.body);
        // GETs of the pages themselves (`/chat/` redirects to `/`).
        for path in ["/", "/chat/", "/play/"] {
            let r = own.send(port, "GET", path, None, None, key);
            assert!(
                r.status < 400,
                "{host}: GET {path}: {} {}",
                r.status,
                r.body
            );
        }
    }
    // The page of this server makes an admin key (with the JSON type it always sends)...
    let page_key = format!(r#"{{"name":"page-{before}","role":"admin"}}"#);
    let own = Page {
        host: format!("localhost:{port}"),
        origin: &format!("http://localhost:{port}"),
        fetch_site: "same-origin",
    }
    .send(
        port,
        "POST",
        "/api/v1/keys",
        Some("application/json"),
        Some(&page_key),
        key,
    );
    assert_eq!(own.status, 201, "{}", own.body);
    let made = own.json()["key"].as_str().expect("key").to_string();
    // ... and so does a curl / SDK client: no Origin, no Sec-Fetch-Site, JSON (with that key,
    // since the first key ended open mode).
    let body = format!(r#"{{"name":"curl-{before}","role":"user"}}"#);
    let r = call(&s.client(), &made, "POST", "/api/v1/keys", Some(&body));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(key_count(s, &made), before + 2);
    made
}

/// Open mode first (no key exists), then keyed mode on the same database.
fn cross_site_table(db: &Db) {
    let models = db.home.join("models");
    std::fs::create_dir_all(&models).unwrap();
    let models = models.display().to_string();
    let s = db.serve(&["--models-dir", &models]);
    assert_eq!(key_count(&s, ""), 0, "the server must start in open mode");
    attacks_are_refused(&s, "");
    // Still open: the refused requests made nothing.
    assert_eq!(key_count(&s, ""), 0);
    let admin = own_pages_and_clients_pass(&s, "");
    // Keyed mode: a valid admin key does not make a foreign page's request acceptable, and
    // without one the answer is the same 403 (the layer runs before authentication).
    attacks_are_refused(&s, &admin);
    attacks_are_refused_without_key(&s);
    own_pages_and_clients_pass(&s, &admin);
}
on_both!(
    cross_site_table,
    cross_site_table_sqlite,
    cross_site_table_postgres
);

/// In keyed mode, the refusal comes before the 401 a missing key would get.
fn attacks_are_refused_without_key(s: &Server) {
    let port = s.port;
    let r = Page {
        host: format!("127.0.0.1:{port}"),
        origin: "http://attacker.example",
        fetch_site: "cross-site",
    }
    .send(
        port,
        "POST",
        "/api/v1/keys",
        Some("text/plain"),
        Some(NEW_KEY),
        "",
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let r = rebound_send(port, "GET", "/api/tags", "attacker.example", "");
    assert_eq!(r.status, 403, "{}", r.body);
    // The same requests from curl get the usual 401.
    let r = call(&s.client(), "", "POST", "/api/v1/keys", Some(NEW_KEY));
    assert_eq!(r.status, 401, "{}", r.body);
}

/// `--allowed-host` lets a name through (and only it); `--cors-origin` gives exactly the
/// listed origins CORS answers and lets them change state.
fn flags_open_exactly_what_they_name(db: &Db) {
    let s = db.serve(&[
        "--allowed-host",
        "weft.test",
        "--allowed-host",
        "box.test:1",
        "--cors-origin",
        "http://app.test:3000",
    ]);
    let port = s.port;
    let named = format!("weft.test:{port}");
    let r = rebound_send(port, "GET", "/api/tags", &named, "");
    assert_eq!(r.status, 200, "{}", r.body);
    let r = rebound_send(port, "GET", "/api/tags", "WEFT.TEST", "");
    assert_eq!(r.status, 200, "{}", r.body);
    // A port given with the name is part of it.
    let r = rebound_send(port, "GET", "/api/tags", &format!("box.test:{port}"), "");
    assert_eq!(r.status, 403, "{}", r.body);
    for host in ["other.test", "weft.test.attacker.example", "sub.weft.test"] {
        let r = rebound_send(port, "GET", "/api/tags", host, "");
        assert_eq!(r.status, 403, "{host}: {}", r.body);
    }
    // The page of the allowed name may change state (same origin), foreign ones still not.
    let origin = format!("http://{named}");
    let r = Page {
        host: named.clone(),
        origin: &origin,
        fetch_site: "same-origin",
    }
    .send(
        port,
        "POST",
        "/api/show",
        Some("application/json"),
        Some(r#"{"model":"smol"}"#),
        "",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = Page {
        host: named.clone(),
        origin: "http://attacker.example",
        fetch_site: "cross-site",
    }
    .send(
        port,
        "POST",
        "/api/v1/keys",
        Some("text/plain"),
        Some(NEW_KEY),
        "",
    );
    assert_eq!(r.status, 403, "{}", r.body);
    // CORS: the listed origin's preflight is answered, another origin's is not.
    let own = format!("127.0.0.1:{port}");
    let preflight = |origin: &str| {
        raw(
            port,
            "OPTIONS",
            "/v1/chat/completions",
            &[
                ("Host", &own),
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
                (
                    "Access-Control-Request-Headers",
                    "authorization, content-type",
                ),
            ],
            None,
        )
    };
    let ok = preflight("http://app.test:3000");
    assert_eq!(ok.status, 204, "{}", ok.body);
    assert_eq!(
        ok.header("access-control-allow-origin"),
        Some("http://app.test:3000")
    );
    let methods = ok.header("access-control-allow-methods").unwrap_or("");
    assert!(methods.contains("POST"), "{methods}");
    let allowed = ok.header("access-control-allow-headers").unwrap_or("");
    assert!(
        allowed.contains("authorization") && allowed.contains("content-type"),
        "{allowed}"
    );
    for other in [
        "http://app.test:3001",
        "https://app.test:3000",
        "http://evil.test",
        "null",
    ] {
        let r = preflight(other);
        assert!(r.status >= 400, "{other}: {} {}", r.status, r.body);
        assert!(
            r.header("access-control-allow-origin").is_none(),
            "{other}: {:?}",
            r.headers
        );
    }
    // The listed origin's requests carry the CORS headers and may change state.
    let app = Page {
        host: own.clone(),
        origin: "http://app.test:3000",
        fetch_site: "cross-site",
    };
    let r = app.send(port, "GET", "/api/tags", None, None, "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://app.test:3000")
    );
    let r = app.send(
        port,
        "POST",
        "/api/show",
        Some("application/json"),
        Some(r#"{"model":"smol"}"#),
        "",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://app.test:3000")
    );
    // Even a listed origin needs JSON: its page could otherwise be tricked into a form post.
    let r = app.send(
        port,
        "POST",
        "/api/v1/keys",
        Some("text/plain"),
        Some(NEW_KEY),
        "",
    );
    assert_eq!(r.status, 403, "{}", r.body);
    // Any other origin: no CORS header on its responses either.
    let r = Page {
        host: own,
        origin: "http://evil.test",
        fetch_site: "cross-site",
    }
    .send(port, "GET", "/api/tags", None, None, "");
    assert!(
        r.header("access-control-allow-origin").is_none(),
        "{:?}",
        r.headers
    );
    assert_eq!(
        key_count(&s, ""),
        0,
        "no refused request may have made a key"
    );
}

#[test]
fn flags_open_exactly_what_they_name_sqlite() {
    if let Some(db) = Db::new(crate::harness::Backend::Sqlite, "flags_open_exactly") {
        flags_open_exactly_what_they_name(&db);
    }
}

/// A malformed flag value stops the server at start-up with a message, not later.
#[test]
fn malformed_flags_are_refused_at_start() {
    for (flag, value) in [
        ("--cors-origin", "app.test"),
        ("--cors-origin", "http://app.test/path"),
        ("--allowed-host", "http://weft.test"),
        ("--allowed-host", "weft test"),
    ] {
        let out = std::process::Command::new(weft_tests::weft_binary())
            .env(
                "WEFT_HOME",
                std::env::temp_dir().join("weft-cross-site-flags"),
            )
            .args([
                "serve",
                "--port",
                "0",
                "--model",
                "/nonexistent.gguf",
                flag,
                value,
            ])
            .output()
            .expect("running weft serve");
        assert!(!out.status.success(), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{flag} {value}: {err}");
    }
}
