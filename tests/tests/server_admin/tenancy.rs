//! Tenants enforced on inference: a tenant key may use only the tenant's models (403 on every
//! chat surface, lists filtered) while its token quota lasts (429, then a reset); a key's
//! tokens-per-minute limit (429 with Retry-After, then recovery).

use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{api_key, call, Db};
use crate::on_both;
use weft_tests::{Client, Response};

on_both!(allow_list, allow_list_sqlite, allow_list_postgres);
on_both!(token_quota, token_quota_sqlite, token_quota_postgres);
on_both!(
    tokens_per_minute,
    tokens_per_minute_sqlite,
    tokens_per_minute_postgres
);

fn post(c: &Client, key: &str, path: &str, body: Value) -> Response {
    call(c, key, "POST", path, Some(&body.to_string()))
}

/// One generated token through each chat surface: (surface, response).
fn every_surface(c: &Client, key: &str, model: &str) -> Vec<(&'static str, Response)> {
    let msgs = json!([{"role": "user", "content": "Hi"}]);
    vec![
        (
            "openai chat",
            post(
                c,
                key,
                "/v1/chat/completions",
                json!({"model": model, "max_tokens": 1, "messages": msgs}),
            ),
        ),
        (
            "openai completions",
            post(
                c,
                key,
                "/v1/completions",
                json!({"model": model, "max_tokens": 1, "prompt": "Hi"}),
            ),
        ),
        (
            "ollama chat",
            post(
                c,
                key,
                "/api/chat",
                json!({"model": model, "stream": false,
            "options": {"num_predict": 1}, "messages": msgs}),
            ),
        ),
        (
            "ollama generate",
            post(
                c,
                key,
                "/api/generate",
                json!({"model": model,
            "stream": false, "prompt": "Hi", "options": {"num_predict": 1}}),
            ),
        ),
        (
            "chat ui",
            post(
                c,
                key,
                "/api/ui/chat",
                json!({"model": model, "maxTokens": 1, "messages": msgs}),
            ),
        ),
    ]
}

fn tenant(c: &Client, admin: &str, body: Value) -> String {
    let r = post(c, admin, "/api/v1/tenants", body);
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()["id"].as_str().unwrap().to_string()
}

fn allow_list(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let r = post(
        &c,
        &admin,
        "/api/create",
        json!({"model": "other", "from": "smol"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let t = tenant(&c, &admin, json!({"name": "acme", "models": ["smol"]}));
    let (_, key) = api_key(
        &c,
        &admin,
        json!({"name": "acme-key", "role": "user", "tenant": t}),
    );

    for (surface, r) in every_surface(&c, &key, "other") {
        assert_eq!(r.status, 403, "{surface}: {}", r.body);
        let j = r.json();
        let msg = if surface.starts_with("openai") {
            assert_eq!(j["error"]["code"], "model_not_allowed", "{surface}: {j}");
            j["error"]["message"].as_str().unwrap().to_string()
        } else {
            j["error"].as_str().unwrap().to_string()
        };
        assert!(
            msg.contains("\"other\"") && msg.contains("acme"),
            "{surface}: {msg}"
        );
    }
    for (surface, r) in every_surface(&c, &key, "smol") {
        assert_eq!(r.status, 200, "{surface}: {}", r.body);
    }
    // The lists show the allowed models only; an admin key (no tenant) sees all.
    let names = |path: &str, key: &str, field: &str, item: &str| -> Vec<String> {
        let j = call(&c, key, "GET", path, None).json();
        let mut v: Vec<String> = j[field]
            .as_array()
            .unwrap_or_else(|| panic!("{path}: {j}"))
            .iter()
            .map(|m| m[item].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names("/v1/models", &key, "data", "id"), ["smol"]);
    assert_eq!(names("/api/tags", &key, "models", "name"), ["smol:latest"]);
    assert_eq!(names("/api/models", &key, "models", "name"), ["smol"]);
    assert_eq!(names("/v1/models", &admin, "data", "id"), ["other", "smol"]);
    // Widening the list lets the model in.
    let r = call(
        &c,
        &admin,
        "PATCH",
        &format!("/api/v1/tenants/{t}"),
        Some(&json!({"models": ["smol", "other"]}).to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(every_surface(&c, &key, "other")[0].1.status, 200);
}

/// The tenant's `tokens_used` as the database has it now.
fn tokens_used(c: &Client, admin: &str, id: &str) -> i64 {
    let r = call(c, admin, "GET", &format!("/api/v1/tenants/{id}"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["tokens_used"].as_i64().expect("tokens_used")
}

fn token_quota(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let t = tenant(&c, &admin, json!({"name": "small", "token_quota": 20}));
    let (_, key) = api_key(
        &c,
        &admin,
        json!({"name": "small-key", "role": "user", "tenant": t}),
    );
    let gen = |model: &str| {
        post(
            &c,
            &key,
            "/v1/completions",
            json!({"model": model, "max_tokens": 1, "prompt": "One two three four five"}),
        )
    };
    let mut refused = None;
    let mut used = 0;
    for i in 0..20 {
        let r = gen("smol");
        if r.status == 429 {
            refused = Some((i, r));
            break;
        }
        assert_eq!(r.status, 200, "{}", r.body);
        // The row holds the request's tokens by the time its response has ended (read at
        // once, no waiting): that is what makes the next check see them.
        used += r.json()["usage"]["total_tokens"].as_i64().unwrap();
        assert_eq!(tokens_used(&c, &admin, &t), used, "after request {i}");
    }
    let (i, r) = refused.expect("a quota of 20 tokens never ran out");
    assert!(i >= 1, "refused before any use");
    assert_eq!(
        r.json()["error"]["code"],
        "insufficient_quota",
        "{}",
        r.body
    );
    assert!(r.body.contains("quota"), "{}", r.body);
    // Every surface is refused, in its own shape.
    let r = post(
        &c,
        &key,
        "/api/generate",
        json!({"model": "smol", "stream": false,
        "prompt": "Hi", "options": {"num_predict": 1}}),
    );
    assert_eq!(r.status, 429, "{}", r.body);
    assert!(
        r.json()["error"].as_str().unwrap().contains("quota"),
        "{}",
        r.body
    );
    assert!(tokens_used(&c, &admin, &t) >= 20);

    // Bad updates change nothing.
    for (path, body, status) in [
        (
            format!("/api/v1/tenants/{t}"),
            json!({"token_quota": -1}),
            400,
        ),
        (
            format!("/api/v1/tenants/{t}"),
            json!({"reset_usage": "yes"}),
            400,
        ),
        (format!("/api/v1/tenants/{t}"), json!({"models": [""]}), 400),
        (format!("/api/v1/tenants/{t}"), json!({"name": ""}), 400),
        (format!("/api/v1/tenants/{t}"), json!({"bogus": 1}), 400),
        (
            "/api/v1/tenants/nope".to_string(),
            json!({"reset_usage": true}),
            404,
        ),
    ] {
        let r = call(&c, &admin, "PATCH", &path, Some(&body.to_string()));
        assert_eq!(r.status, status, "{body}: {}", r.body);
    }
    assert_eq!(gen("smol").status, 429);
    // A reset starts the count again.
    let r = call(
        &c,
        &admin,
        "PATCH",
        &format!("/api/v1/tenants/{t}"),
        Some(r#"{"reset_usage": true}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["tokens_used"], 0, "{}", r.body);
    assert_eq!(r.json()["token_quota"], 20, "{}", r.body);
    assert_eq!(gen("smol").status, 200);
    // So does lifting the quota.
    let r = call(
        &c,
        &admin,
        "PATCH",
        &format!("/api/v1/tenants/{t}"),
        Some(r#"{"token_quota": null}"#),
    );
    assert_eq!(r.json()["token_quota"], Value::Null, "{}", r.body);
    for _ in 0..3 {
        assert_eq!(gen("smol").status, 200);
    }
    let audit = call(&c, &admin, "GET", "/api/v1/audit", None).body;
    assert!(audit.contains(&format!("/api/v1/tenants/{t}")), "{audit}");
}

fn tokens_per_minute(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    assert_eq!(
        post(
            &c,
            &admin,
            "/api/v1/keys",
            json!({"name": "zero", "role": "user", "tokens_per_minute": 0})
        )
        .status,
        400
    );
    let (_, key) = api_key(
        &c,
        &admin,
        json!({"name": "tpm", "role": "user", "tokens_per_minute": 120}),
    );
    let listed = call(&c, &admin, "GET", "/api/v1/keys", None).json();
    assert!(listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k["tokens_per_minute"] == 120));
    let gen = || {
        post(
            &c,
            &key,
            "/v1/completions",
            json!({"model": "smol", "max_tokens": 1,
            "prompt": "Count with me: one two three four five six seven eight nine ten"}),
        )
    };
    let mut limited = None;
    for _ in 0..60 {
        let r = gen();
        if r.status == 429 {
            limited = Some(r);
            break;
        }
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = limited.expect("120 tokens per minute never ran out in 60 requests");
    assert_eq!(
        r.json()["error"]["code"],
        "rate_limit_exceeded",
        "{}",
        r.body
    );
    assert!(r.body.contains("tokens per minute"), "{}", r.body);
    let wait: u64 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After header in seconds");
    assert!(wait >= 1, "{wait}");
    // The Ollama surface says so in its shape; another key is not limited.
    let r = post(
        &c,
        &key,
        "/api/generate",
        json!({"model": "smol", "stream": false,
        "prompt": "Hi", "options": {"num_predict": 1}}),
    );
    assert_eq!(r.status, 429, "{}", r.body);
    assert!(r.header("retry-after").is_some());
    assert!(r.json()["error"].is_string(), "{}", r.body);
    assert_eq!(gen_with(&c, &admin).status, 200);
    std::thread::sleep(Duration::from_secs(wait));
    let r = gen();
    assert_eq!(r.status, 200, "not recovered after Retry-After: {}", r.body);
}

fn gen_with(c: &Client, key: &str) -> Response {
    post(
        c,
        key,
        "/v1/completions",
        json!({"model": "smol", "max_tokens": 1, "prompt": "Hi"}),
    )
}
