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
