//! Pull policy (issue item 7; review failure 6): a pull may not be bent into a request to
//! this machine or its network. Redirects to another port are refused; loopback destinations
//! are refused without `--pull-allow-private` (or `--pull-allow-host`), and reach nothing; a
//! closed port and an open port that does not speak HTTP fail with the same words; a password
//! or token in the URL never reaches the job row, `/api/v1/jobs`, `/api/pull` or the log.
//! Every listener here is on loopback (the address classifier itself is unit-tested in
//! `store::pull_policy`, on addresses, without connecting).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use weft_tests::{Client, Server};

use crate::harness::{call, Backend, Db};

/// A loopback listener answering every connection with `reply` (then closing), counting
/// the connections it got.
struct Fake {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Fake {
    fn start(reply: impl Fn() -> Vec<u8> + Send + 'static) -> Fake {
        Fake::answering(move |_| reply())
    }

    /// Answers with `reply(request head)`.
    fn answering(reply: impl Fn(&str) -> Vec<u8> + Send + 'static) -> Fake {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { continue };
                h.fetch_add(1, Ordering::SeqCst);
                let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 4096];
                let n = c.read(&mut buf).unwrap_or(0);
                let _ = c.write_all(&reply(&String::from_utf8_lossy(&buf[..n])));
            }
        });
        Fake { port, hits }
    }

    /// Answers HTTP with a redirect to `to`.
    fn redirecting(to: String) -> Fake {
        Fake::start(move || {
            format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .into_bytes()
        })
    }

    /// Answers HTTP with 404.
    fn not_found() -> Fake {
        Fake::start(|| {
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
        })
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Starts a pull of `url` and waits for its job to end; the job as `/api/v1/models/jobs/ID`
/// shows it.
fn pull(c: &Client, url: &str) -> Value {
    let body = json!({ "model": url }).to_string();
    let r = call(c, "", "POST", "/api/v1/models/pull", Some(&body));
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["job_id"].as_str().unwrap().to_string();
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        let r = call(c, "", "GET", &format!("/api/v1/models/jobs/{id}"), None);
        assert_eq!(r.status, 200, "{}", r.body);
        let j = r.json();
        if ["succeeded", "failed", "cancelled"].contains(&j["status"].as_str().unwrap_or("")) {
            return j;
        }
        assert!(Instant::now() < end, "the pull of {url} did not end: {j}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn error_of(j: &Value) -> String {
    assert_eq!(j["status"], "failed", "{j}");
    j["error"].as_str().unwrap_or("").to_string()
}

fn serve(db: &Db, extra: &[&str]) -> Server {
    let store = db.home.join("store");
    std::fs::create_dir_all(&store).unwrap();
    let mut args = vec!["--models-dir", store.to_str().unwrap()];
    args.extend_from_slice(extra);
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    db.serve(&refs)
}

/// A redirect to another port of the same host is refused, and the target never contacted.
#[test]
fn a_redirect_to_another_port_is_refused() {
    let Some(db) = Db::new(Backend::Sqlite, "pull-redirect") else {
        return;
    };
    let s = serve(&db, &["--pull-allow-private"]);
    let target = Fake::not_found();
    let hop = Fake::redirecting(format!("http://127.0.0.1:{}/m.gguf", target.port));
    let e = error_of(&pull(
        &s.client(),
        &format!("http://127.0.0.1:{}/m.gguf", hop.port),
    ));
    assert!(e.contains("another scheme, host or port"), "{e}");
    assert!(hop.hits() >= 1);
    assert_eq!(target.hits(), 0, "the redirect was followed");
    // A redirect on the same origin is followed (to a 404 here).
    let same = Fake::answering(|head| {
        if head.starts_with("GET /m.gguf ") {
            b"HTTP/1.1 302 Found\r\nLocation: /n.gguf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
        } else {
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
        }
    });
    let e = error_of(&pull(
        &s.client(),
        &format!("http://127.0.0.1:{}/m.gguf", same.port),
    ));
    assert!(e.contains("not found (404)"), "{e}");
    assert_eq!(same.hits(), 2);
}

/// Without `--pull-allow-private`, loopback in every spelling is refused with the one
/// message and never contacted; `--pull-allow-host` lets one host through.
#[test]
fn loopback_needs_an_explicit_allowance() {
    let Some(db) = Db::new(Backend::Sqlite, "pull-private") else {
        return;
    };
    let fake = Fake::not_found();
    let p = fake.port;
    {
        let s = serve(&db, &[]);
        for url in [
            format!("http://127.0.0.1:{p}/m.gguf"),
            format!("http://localhost:{p}/m.gguf"),
            format!("http://[::1]:{p}/m.gguf"),
            format!("http://[::ffff:127.0.0.1]:{p}/m.gguf"),
            format!("http://127.1:{p}/m.gguf"),
            format!("http://0.0.0.0:{p}/m.gguf"),
        ] {
            let e = error_of(&pull(&s.client(), &url));
            assert!(e.contains("could not be reached"), "{url}: {e}");
        }
        assert_eq!(fake.hits(), 0, "a loopback pull reached the listener");
    }
    let s = serve(&db, &["--pull-allow-host", "127.0.0.1"]);
    let e = error_of(&pull(&s.client(), &format!("http://127.0.0.1:{p}/m.gguf")));
    assert!(e.contains("not found (404)"), "{e}");
    assert!(fake.hits() >= 1);
}

/// A closed port, an open port that answers garbage and one that closes at once give the
/// same message, and it is the policy's message too: pulls cannot map ports.
#[test]
fn open_and_closed_ports_read_the_same() {
    let Some(db) = Db::new(Backend::Sqlite, "pull-ports") else {
        return;
    };
    let banner = Fake::start(|| b"SSH-2.0-OpenSSH_9.6\r\n".to_vec());
    let silent = Fake::start(Vec::new);
    let closed = closed_port();
    let s = serve(&db, &["--pull-allow-private"]);
    let mut seen = Vec::new();
    for port in [closed, banner.port, silent.port] {
        let url = format!("http://127.0.0.1:{port}/m.gguf");
        let e = error_of(&pull(&s.client(), &url));
        seen.push(e.replace(&port.to_string(), "PORT"));
    }
    assert!(banner.hits() >= 1 && silent.hits() >= 1);
    assert!(seen.iter().all(|e| e == &seen[0]), "{seen:#?}");
    // Refused by policy: the same words.
    drop(s);
    let s = serve(&db, &[]);
    let e = error_of(&pull(
        &s.client(),
        &format!("http://127.0.0.1:{closed}/m.gguf"),
    ));
    assert_eq!(e.replace(&closed.to_string(), "PORT"), seen[0]);
}

/// `user:password@` and a token parameter never show in the job row, `/api/v1/jobs`, the
/// Ollama `/api/pull` answer, or the server's log.
#[test]
fn credentials_in_a_pull_url_are_never_shown() {
    let Some(db) = Db::new(Backend::Sqlite, "pull-secret") else {
        return;
    };
    let fake = Fake::not_found();
    let s = serve(&db, &["--pull-allow-private"]);
    let c = s.client();
    let url = format!(
        "http://weft-user:hunter2-pass@127.0.0.1:{}/m.gguf?access_token=tok-s3cret&rev=main",
        fake.port
    );
    let j = pull(&c, &url);
    let shown = j.to_string();
    let listed = call(&c, "", "GET", "/api/v1/jobs", None).body;
    let r = call(
        &c,
        "",
        "POST",
        "/api/pull",
        Some(&json!({"model": url, "stream": false}).to_string()),
    );
    assert!(r.status >= 400, "{}", r.body);
    let log = s.log().join("\n");
    for (what, text) in [
        ("job", &shown),
        ("jobs", &listed),
        ("/api/pull", &r.body),
        ("log", &log),
    ] {
        for secret in ["hunter2-pass", "tok-s3cret", "weft-user"] {
            assert!(!text.contains(secret), "{what} shows {secret}: {text}");
        }
    }
    // What is shown still names the place.
    assert!(
        shown.contains(&format!("127.0.0.1:{}/m.gguf", fake.port)),
        "{shown}"
    );
    assert!(fake.hits() >= 1);
}
