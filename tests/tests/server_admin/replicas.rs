//! Two `weft serve` processes on one Postgres: a key made on one works on the other, a revoke
//! on one holds on the other at once (keys are looked up in the database on every request),
//! and a setting changed on one is seen on the other (settings are read from the database;
//! the live sampling defaults follow by polling every 2 s).

use serde_json::json;

use crate::harness::{api_key, call, Backend, Db};

#[test]
fn two_servers_share_postgres() {
    let Some(db) = Db::new(Backend::Postgres, "replicas") else {
        return;
    };
    let admin = "weft_shared-bootstrap-key-of-both-replicas-0001";
    let a = db.serve_env(&[], &[("WEFT_ADMIN_KEY", admin)]);
    let b = db.serve_env(&[], &[("WEFT_ADMIN_KEY", admin)]);
    let (ca, cb) = (a.client(), b.client());
    let (id, key) = api_key(&ca, admin, json!({"name": "shared", "role": "user"}));
    assert_eq!(call(&cb, &key, "GET", "/v1/models", None).status, 200);
    let r = call(
        &ca,
        admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"temperature": 0.25}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let s = call(&cb, admin, "GET", "/api/v1/settings", None).json();
    assert_eq!(s["temperature"].as_f64(), Some(0.25), "{s}");
    let r = call(&cb, admin, "DELETE", &format!("/api/v1/keys/{id}"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = call(&ca, &key, "GET", "/v1/models", None);
    assert_eq!(r.status, 401, "{}", r.body);
    // Both audited into the one log.
    let rows = call(&ca, admin, "GET", "/api/v1/audit", None).json();
    let n = rows["data"].as_array().unwrap().len();
    assert!(n >= 3, "{rows}");
}

/// A moderation rule added on one replica applies on the other (each re-reads the rules every
/// 2 s; the test allows 10 s so a loaded machine does not make it flaky), and so does the
/// `moderation` setting.
#[test]
fn moderation_rules_reach_the_other_replica() {
    let Some(db) = Db::new(Backend::Postgres, "replicas-moderation") else {
        return;
    };
    let admin = "weft_shared-bootstrap-key-of-both-replicas-0002";
    let a = db.serve_env(&[], &[("WEFT_ADMIN_KEY", admin)]);
    let b = db.serve_env(&[], &[("WEFT_ADMIN_KEY", admin)]);
    let (ca, cb) = (a.client(), b.client());
    let body = r#"{"model": "smol", "max_tokens": 1, "messages": [{"role": "user", "content": "a forbidden word"}]}"#;
    let status_on_b = || call(&cb, admin, "POST", "/v1/chat/completions", Some(body)).status;
    assert_eq!(status_on_b(), 200);
    crate::moderation::add_rule(&ca, admin, "forbidden", "block", "input");
    assert!(
        eventually(|| status_on_b() == 400),
        "the rule never applied on B"
    );
    let r = call(
        &ca,
        admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"moderation": false}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        eventually(|| status_on_b() == 200),
        "moderation stayed on on B"
    );
}

/// Whether `f` holds within 10 s, trying every 250 ms.
fn eventually(f: impl Fn() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    f()
}
