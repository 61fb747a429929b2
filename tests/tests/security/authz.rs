//! Authorization in the router's shape (issue 33, item 2), checked from outside: every route
//! of the server's own `/openapi.json`, every method, against `routes.tsv` (the decision kept
//! in the repo), for each kind of caller — no key, a key the server never issued, readonly,
//! user, admin, a user key of another tenant, open mode, open mode from a foreign origin. The
//! routes outside the document (pages, `/openapi.json`, fallbacks) are in [`OUTSIDE_DOCUMENT`].
//!
//! A route in the document without a line in `routes.tsv` fails the test (a new route
//! without a decision fails CI), and so does a line whose route is gone.
//!
//! Each request is the real one over HTTP on loopback, with path parameters filled with dummy
//! values and, for a method with a body, a body the handler refuses (malformed JSON, or an
//! empty multipart form on the upload routes) so an allowed request changes nothing;
//! `POST /api/v1/restart` goes last. Only the status line and headers are read (a stream such
//! as `/api/v1/logs/stream` is never waited for).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{api_key, call, Db};
use crate::on_both;

/// Method, path template and required role of every route in the OpenAPI document.
const TABLE: &str = include_str!("routes.tsv");

/// What a route needs, in the order of what callers may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Need {
    Public,
    /// Public, and the route judges the credentials it is sent itself (sign-in: a wrong
    /// password or no session is its own 401), so only a 403 counts as a refusal.
    SignIn,
    Read,
    User,
    Admin,
}

impl Need {
    fn parse(s: &str) -> Option<Need> {
        match s {
            "public" => Some(Need::Public),
            "signin" => Some(Need::SignIn),
            "read" => Some(Need::Read),
            "user" => Some(Need::User),
            "admin" => Some(Need::Admin),
            _ => None,
        }
    }
}

/// One route and what it needs.
#[derive(Clone, Debug)]
struct Route {
    method: String,
    path: String,
    need: Need,
}

/// Routes the OpenAPI document does not list, with concrete paths: the pages, the document
/// itself, the download of model files, HEAD of a GET route, and the fallbacks (a path no
/// route serves: 404 for anyone; any other `/v1` path: 501 for any key).
const OUTSIDE_DOCUMENT: &[(&str, &str, Need)] = &[
    ("GET", "/openapi.json", Need::Public),
    ("GET", "/", Need::Public),
    ("GET", "/chat", Need::Public),
    ("GET", "/chat/", Need::Public),
    ("GET", "/chat/index.html", Need::Public),
    ("GET", "/play", Need::Public),
    ("GET", "/play/", Need::Public),
    ("GET", "/play/index.html", Need::Public),
    ("GET", "/models", Need::Read),
    ("GET", "/models/authz-probe/file", Need::Read),
    ("HEAD", "/models/authz-probe/file", Need::Read),
    ("HEAD", "/v1/models", Need::Read),
    ("GET", "/authz-probe-no-such-route", Need::Public),
    ("POST", "/api/v1/authz-probe-no-such-route", Need::Public),
    ("DELETE", "/api/authz-probe-no-such-route", Need::Public),
    ("GET", "/v1/authz-probe-no-such-route", Need::Read),
    ("POST", "/v1/authz-probe-no-such-route", Need::Read),
];

/// Parses `routes.tsv` (panics naming the line that is wrong).
fn table() -> Vec<Route> {
    let mut out = Vec::new();
    for (i, line) in TABLE.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').map(str::trim).collect();
        let [method, path, need] = cols[..] else {
            panic!(
                "routes.tsv line {}: want `METHOD<TAB>PATH<TAB>ROLE`: {line:?}",
                i + 1
            );
        };
        let need = Need::parse(need).unwrap_or_else(|| {
            panic!(
                "routes.tsv line {}: role {need:?} is not public, read, user or admin",
                i + 1
            )
        });
        out.push(Route {
            method: method.to_ascii_uppercase(),
            path: path.to_string(),
            need,
        });
    }
    out
}

/// Every (method, path) of the server's OpenAPI document.
fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let paths = doc["paths"].as_object().expect("the document has paths");
    let methods = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];
    let mut out = BTreeSet::new();
    for (path, item) in paths {
        for m in methods {
            if item.get(m).is_some() {
                out.insert((m.to_ascii_uppercase(), path.clone()));
            }
        }
    }
    out
}

/// The table and the document name the same routes.
fn same_routes(table: &[Route], doc: &BTreeSet<(String, String)>) {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for r in table {
        let k = (r.method.clone(), r.path.clone());
        if !seen.insert(k.clone()) {
            problems.push(format!("{} {} is in routes.tsv twice", r.method, r.path));
        }
        if !doc.contains(&k) {
            problems.push(format!(
                "{} {} is in tests/tests/security/routes.tsv but the server no longer has it: remove its line",
                r.method, r.path
            ));
        }
    }
    for (m, p) in doc {
        if !seen.contains(&(m.clone(), p.clone())) {
            problems.push(format!(
                "{m} {p} is a route of /openapi.json without a decision: add the line `{m}\t{p}\t<public|read|user|admin>` to tests/tests/security/routes.tsv (who may call it), and declare that role where the route is mounted (auth::Routes)"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The path with each `{param}` filled with a dummy value.
fn fill(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let j = rest[i..].find('}').map_or(rest.len(), |j| i + j + 1);
        let name = rest[i + 1..j - 1].trim_start_matches('*');
        out.push_str(&format!("authz-probe-{name}"));
        rest = &rest[j..];
    }
    out.push_str(rest);
    out
}

/// Status and headers of one request; the body is not waited for.
fn probe(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let body: &[u8] = if matches!(method, "GET" | "HEAD" | "OPTIONS") {
        b""
    } else if path.ends_with("/upload") || path.ends_with("/backup/restore") {
        req.push_str("Content-Type: multipart/form-data; boundary=authzprobe\r\n");
        b"--authzprobe--\r\n"
    } else {
        // Malformed on purpose: an allowed request is refused by its handler (400).
        req.push_str("Content-Type: application/json\r\n");
        b"{\"authz_probe\": "
    };
    if !body.is_empty() || !matches!(method, "GET" | "HEAD" | "OPTIONS") {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") && raw.len() < 65536 {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) => panic!("{method} {path}: {e}"),
        }
    }
    let head = String::from_utf8_lossy(&raw).to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: no status line in {head:?}"));
    (status, head.to_ascii_lowercase())
}

/// A kind of caller: its headers and the highest need it may meet (`None`: only public).
struct Caller {
    name: &'static str,
    headers: Vec<(&'static str, String)>,
    level: Option<Need>,
    /// Whether a refusal is a 401 (no usable key) rather than a 403 (a role too low, or a
    /// foreign origin).
    unauthenticated: bool,
    /// Only state-changing requests are checked (the foreign-origin column).
    only_changes: bool,
}

impl Caller {
    fn key(name: &'static str, key: &str, level: Option<Need>) -> Caller {
        Caller {
            name,
            headers: vec![("Authorization", format!("Bearer {key}"))],
            level,
            unauthenticated: level.is_none(),
            only_changes: false,
        }
    }
}

/// Sends every route to every caller; returns the mismatches.
fn check(port: u16, routes: &[Route], callers: &[Caller]) -> Vec<String> {
    let mut wrong = Vec::new();
    // The restart (if allowed) ends the server: last, after every other route.
    let (last, first): (Vec<&Route>, Vec<&Route>) =
        routes.iter().partition(|r| r.path == "/api/v1/restart");
    for r in first.into_iter().chain(last) {
        let path = fill(&r.path);
        for c in callers {
            let changes = !matches!(r.method.as_str(), "GET" | "HEAD" | "OPTIONS");
            if c.only_changes && !changes {
                continue;
            }
            let headers: Vec<(&str, &str)> =
                c.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let (status, head) = probe(port, &r.method, &path, &headers);
            let public = matches!(r.need, Need::Public | Need::SignIn);
            let allowed = c.level.is_some_and(|l| l >= r.need) || public;
            let allowed = allowed && !c.only_changes;
            let denied = status == 401 || status == 403;
            let want = if allowed {
                "not 401/403".to_string()
            } else if c.unauthenticated {
                "401".to_string()
            } else {
                "403".to_string()
            };
            let ok = match (allowed, c.unauthenticated) {
                (true, _) if r.need == Need::SignIn => status != 403,
                (true, _) => !denied,
                (false, true) => status == 401 && head.contains("www-authenticate: bearer"),
                (false, false) => status == 403,
            };
            if !ok {
                wrong.push(format!(
                    "{} {} ({}, needs {:?}) as {}: got {status}, want {want}",
                    r.method, path, r.path, r.need, c.name
                ));
            }
        }
    }
    wrong
}

/// The routes to probe: the table, plus those outside the document.
fn all_routes(table: &[Route]) -> Vec<Route> {
    let mut all = table.to_vec();
    all.extend(OUTSIDE_DOCUMENT.iter().map(|(m, p, n)| Route {
        method: m.to_string(),
        path: p.to_string(),
        need: *n,
    }));
    all
}

on_both!(every_route, every_route_sqlite, every_route_postgres);

/// Open mode (no key yet) first, then keyed mode on the same database.
fn every_route(db: &Db) {
    let table = table();
    let routes = all_routes(&table);

    let server = db.serve(&[]);
    let c = server.client();
    let doc = call(&c, "", "GET", "/openapi.json", None);
    assert_eq!(doc.status, 200, "{}", doc.body);
    same_routes(&table, &documented(&doc.json()));
    assert_eq!(
        call(&c, "", "GET", "/api/v1/about", None).json()["auth"],
        "open"
    );
    let mut callers = vec![Caller {
        name: "open mode",
        headers: vec![],
        level: Some(Need::Admin),
        unauthenticated: false,
        only_changes: false,
    }];
    // The site layer (auth's outer neighbour) refuses every state change a foreign page sends.
    // First: on the last route (restart) the open-mode caller ends the server.
    callers.insert(
        0,
        Caller {
            name: "open mode from a foreign origin",
            headers: vec![("Origin", "http://attacker.example".into())],
            level: None,
            unauthenticated: false,
            only_changes: true,
        },
    );
    let wrong = check(c.port, &routes, &callers);
    assert!(wrong.is_empty(), "open mode:\n{}", wrong.join("\n"));
    drop(server);

    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let (_, user) = api_key(&c, &admin, json!({"name": "user", "role": "user"}));
    let (_, readonly) = api_key(&c, &admin, json!({"name": "ro", "role": "readonly"}));
    let r = call(
        &c,
        &admin,
        "POST",
        "/api/v1/tenants",
        Some(r#"{"name": "other", "models": ["smol"]}"#),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let tenant = r.json()["id"].as_str().unwrap().to_string();
    let (_, other) = api_key(
        &c,
        &admin,
        json!({"name": "other-tenant", "role": "user", "tenant": tenant}),
    );
    let callers = vec![
        Caller {
            name: "no key",
            headers: vec![],
            level: None,
            unauthenticated: true,
            only_changes: false,
        },
        Caller::key(
            "a key never issued",
            "weft_authz-probe-not-a-key-0000000000",
            None,
        ),
        Caller::key("readonly", &readonly, Some(Need::Read)),
        Caller::key("user", &user, Some(Need::User)),
        Caller::key("user of another tenant", &other, Some(Need::User)),
        Caller::key("admin", &admin, Some(Need::Admin)),
    ];
    // `GET /metrics` needs a key unless the `metrics_public` setting is on.
    let r = call(
        &c,
        &admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"metrics_public": true}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(call(&c, "", "GET", "/metrics", None).status, 200);
    let r = call(
        &c,
        &admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"metrics_public": false}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(call(&c, "", "GET", "/metrics", None).status, 401);

    let wrong = check(c.port, &routes, &callers);
    assert!(wrong.is_empty(), "keyed mode:\n{}", wrong.join("\n"));
}

#[test]
fn the_table_parses_and_fills() {
    let t = table();
    assert!(t.len() > 50, "routes.tsv lists {} routes", t.len());
    assert_eq!(
        fill("/api/code/artifacts/{run_id}/{path}"),
        "/api/code/artifacts/authz-probe-run_id/authz-probe-path"
    );
    assert_eq!(fill("/health"), "/health");
}
