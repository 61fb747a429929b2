//! Settings: validated, persisted across a restart, and applied to the next request as the
//! sampling defaults.

use serde_json::json;

use crate::harness::{call, Db};
use crate::on_both;
use weft_tests::Client;

on_both!(
    settings_persist,
    settings_persist_sqlite,
    settings_persist_postgres
);

fn chat(c: &Client, key: &str, extra: serde_json::Value) -> String {
    let mut body = json!({"model": "smol", "max_tokens": 12,
        "messages": [{"role": "user", "content": "Tell me a story about a cat."}]});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let r = call(
        c,
        key,
        "POST",
        "/v1/chat/completions",
        Some(&body.to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn settings_persist(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let r = call(&c, &admin, "GET", "/api/v1/settings", None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["temperature"].is_null(), "{}", r.body);
    let r = call(
        &c,
        &admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"temperature": 1.0, "seed": 42, "top_k": 20}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["seed"], 42);
    // Applied live: a request that sets nothing samples as one that sets the same values.
    let by_settings = chat(&c, &admin, json!({}));
    let by_request = chat(
        &c,
        &admin,
        json!({"temperature": 1.0, "seed": 42, "top_k": 20}),
    );
    assert_eq!(by_settings, by_request);
    // PATCH null unsets one key; the others stay.
    let r = call(
        &c,
        &admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"top_k": null}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.json()["top_k"].is_null() && r.json()["seed"] == 42,
        "{}",
        r.body
    );
    drop(server);

    let server = db.serve(&[]);
    let c = server.client();
    let s = call(&c, &admin, "GET", "/api/v1/settings", None).json();
    assert_eq!(
        (s["temperature"].as_f64(), s["seed"].as_i64()),
        (Some(1.0), Some(42)),
        "{s}"
    );
    assert!(s["top_k"].is_null(), "{s}");
    // POST replaces everything.
    let r = call(
        &c,
        &admin,
        "POST",
        "/api/v1/settings",
        Some(r#"{"top_p": 0.9}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let s = r.json();
    assert!(
        s["seed"].is_null() && s["top_p"].as_f64() == Some(0.9),
        "{s}"
    );
}

on_both!(limits_live, limits_live_sqlite, limits_live_postgres);

/// `max_tokens`, `queue_size` and `metrics_public` apply to the running server at once, and
/// out-of-range values are refused.
fn limits_live(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&["--max-tokens", "64", "--queue", "8"]);
    let c = server.client();
    let tokens = |max: Option<u64>| {
        let mut body = json!({"model": "smol", "temperature": 0, "ignore_eos": true,
            "messages": [{"role": "user", "content": "Count to fifty."}]});
        if let Some(m) = max {
            body["max_tokens"] = json!(m);
        }
        let r = call(
            &c,
            &admin,
            "POST",
            "/v1/chat/completions",
            Some(&body.to_string()),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["usage"]["completion_tokens"].as_u64().unwrap()
    };
    let queue =
        || call(&c, &admin, "GET", "/api/queue/status", None).json()["queue_capacity"].clone();
    assert_eq!(tokens(Some(9)), 9);
    assert_eq!(queue(), 8);
    // Without a key the metrics are closed once keys exist.
    assert_eq!(call(&c, "", "GET", "/metrics", None).status, 401);

    let r = call(
        &c,
        &admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"max_tokens": 5, "queue_size": 3, "metrics_public": true}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(tokens(None), 5, "the setting is the default");
    assert_eq!(tokens(Some(9)), 5, "and the cap");
    assert_eq!(queue(), 3);
    assert_eq!(call(&c, "", "GET", "/metrics", None).status, 200);
    // Other routes still need a key.
    assert_eq!(call(&c, "", "GET", "/v1/models", None).status, 401);

    for bad in [
        r#"{"max_tokens": 0}"#,
        r#"{"queue_size": -1}"#,
        r#"{"queue_size": 1.5}"#,
        r#"{"metrics_public": "yes"}"#,
    ] {
        let r = call(&c, &admin, "PATCH", "/api/v1/settings", Some(bad));
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    // Unset: back to the flags.
    let r = call(
        &c,
        &admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"max_tokens": null, "queue_size": null, "metrics_public": null}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(tokens(Some(9)), 9);
    assert_eq!(queue(), 8);
    assert_eq!(call(&c, "", "GET", "/metrics", None).status, 401);
}
