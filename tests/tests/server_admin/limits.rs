//! Per-key rate limits (429 with Retry-After, then recovery), the official `openai` client
//! with keys, open mode on loopback, and the refusal to serve other machines without a key.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::harness::{api_key, call, Backend, Db};
use crate::on_both;
use weft_tests::{python, weft_binary};

on_both!(rate_limit, rate_limit_sqlite, rate_limit_postgres);
on_both!(openai_client, openai_client_sqlite, openai_client_postgres);

fn rate_limit(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let (_, key) = api_key(
        &c,
        &admin,
        json!({"name": "slow", "role": "user", "rate_limit_rpm": 60}),
    );
    let mut limited = None;
    for _ in 0..500 {
        let r = call(&c, &key, "GET", "/v1/models", None);
        if r.status == 429 {
            limited = Some(r);
            break;
        }
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = limited.expect("60 requests per minute never ran out in 500 requests");
    assert_eq!(
        r.json()["error"]["code"],
        "rate_limit_exceeded",
        "{}",
        r.body
    );
    let wait: u64 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After header in seconds");
    assert!(wait >= 1, "{wait}");
    // Another key is not limited by this one's use.
    assert_eq!(call(&c, &admin, "GET", "/v1/models", None).status, 200);
    std::thread::sleep(Duration::from_secs(wait));
    let r = call(&c, &key, "GET", "/v1/models", None);
    assert_eq!(r.status, 200, "not recovered after Retry-After: {}", r.body);
}

fn openai_client(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let (_, user) = api_key(&c, &admin, json!({"name": "py", "role": "user"}));
    let (_, readonly) = api_key(&c, &admin, json!({"name": "py-ro", "role": "readonly"}));
    if let Some(out) = python(
        "auth_client.py",
        &server.base(),
        &["smol", &user, &readonly],
        &["openai"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
}

/// With no key, a loopback server is open (as before keys existed) until the first key is made.
#[test]
fn open_until_the_first_key() {
    let Some(db) = Db::new(Backend::Sqlite, "open") else {
        return;
    };
    let server = db.serve(&[]);
    let c = server.client();
    assert_eq!(
        call(&c, "", "GET", "/api/v1/about", None).json()["auth"],
        "open"
    );
    // A client's placeholder key is ignored while open (the openai client always sends one).
    assert_eq!(call(&c, "unused", "GET", "/v1/models", None).status, 200);
    let r = call(
        &c,
        "",
        "POST",
        "/api/v1/keys",
        Some(r#"{"name":"first","role":"admin"}"#),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let key = r.json()["key"].as_str().unwrap().to_string();
    assert_eq!(call(&c, "", "GET", "/v1/models", None).status, 401);
    assert_eq!(call(&c, &key, "GET", "/v1/models", None).status, 200);
    let audit = call(&c, &key, "GET", "/api/v1/audit", None).json();
    assert_eq!(audit["data"][0]["actor"], "open", "{audit}");
}

/// Whether `weft serve --host 0.0.0.0 --port 0 ARGS` starts listening (the harness's server
/// always binds loopback, so this one is started by hand and killed by its id).
fn starts_on_all_addresses(db: &Db, args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    use std::io::{BufRead, BufReader};
    let model = weft_core::test_support::model_path("smollm2").unwrap();
    let mut child = Command::new(weft_binary())
        .env("WEFT_HOME", &db.home)
        .envs(env.iter().copied())
        .args(["serve", "--host", "0.0.0.0", "--port", "0", "--model"])
        .arg(&model)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running weft serve");
    let mut log = String::new();
    let mut listening = false;
    for line in BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
    {
        log.push_str(&line);
        log.push('\n');
        if line.contains("listening on http://") {
            listening = true;
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    (listening, log)
}

/// `--host 0.0.0.0` with no key refuses to start unless `--insecure-no-auth` or
/// WEFT_ADMIN_KEY; the env key is accepted as an admin key.
#[test]
fn non_loopback_needs_a_key() {
    let Some(db) = Db::new(Backend::Sqlite, "refuse") else {
        return;
    };
    let (ok, log) = starts_on_all_addresses(&db, &[], &[]);
    assert!(!ok && log.contains("--insecure-no-auth"), "{log}");
    let (ok, log) = starts_on_all_addresses(&db, &["--insecure-no-auth"], &[]);
    assert!(ok, "{log}");
    let key = "weft_operator-chosen-bootstrap-key-for-this-test";
    let (ok, log) = starts_on_all_addresses(&db, &[], &[("WEFT_ADMIN_KEY", key)]);
    assert!(ok, "{log}");
    let server = db.serve_env(&[], &[("WEFT_ADMIN_KEY", key)]);
    let c = server.client();
    assert_eq!(call(&c, "", "GET", "/api/v1/keys", None).status, 401);
    assert_eq!(call(&c, key, "GET", "/api/v1/keys", None).status, 200);
}
