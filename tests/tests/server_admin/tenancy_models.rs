//! A tenant's allow-list on every surface that names or lists a model (issue 33, failure 4):
//! the server serves `smol` and `smol2` (the same file); a key of a tenant allowed only
//! `smol` cannot download, list, show or look up `smol2` — each answers exactly as for a
//! name that does not exist — and cannot generate with it (403, as for a missing name). No
//! body of these routes carries the model's absolute path.

use serde_json::{json, Value};
use weft_core::test_support::model_path;

use crate::harness::{api_key, call, Db};
use crate::on_both;
use weft_tests::{Client, Response};

on_both!(
    allow_list_everywhere,
    allow_list_everywhere_sqlite,
    allow_list_everywhere_postgres
);

fn post(c: &Client, key: &str, path: &str, body: Value) -> Response {
    call(c, key, "POST", path, Some(&body.to_string()))
}

fn get(c: &Client, key: &str, path: &str) -> Response {
    call(c, key, "GET", path, None)
}

/// A body with the model's name replaced, to compare a forbidden name's answer with a
/// missing name's.
fn with_name(body: &str, name: &str) -> String {
    body.replace(name, "NAME")
}

/// The listed names of a list route.
fn listed(r: &Response, field: &str, item: &str) -> Vec<String> {
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    let mut v: Vec<String> = j[field]
        .as_array()
        .unwrap_or_else(|| panic!("{j}"))
        .iter()
        .map(|m| m[item].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

fn allow_list_everywhere(db: &Db) {
    let file = model_path("smollm2").expect("Db::new found it");
    let abs = std::fs::canonicalize(&file).unwrap();
    let folder = abs.parent().unwrap().display().to_string();
    let given_folder = file.parent().unwrap().display().to_string();
    let admin = db.cli_key("admin");
    let server = db.serve(&["--model", &format!("smol2={}", file.display())]);
    let c = server.client();
    let r = post(
        &c,
        &admin,
        "/api/v1/tenants",
        json!({"name": "acme", "models": ["smol"]}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let t = r.json()["id"].as_str().unwrap().to_string();
    let (_, key) = api_key(
        &c,
        &admin,
        json!({"name": "acme-key", "role": "user", "tenant": t}),
    );
    // Every body a client sees below, checked for paths at the end.
    let mut bodies: Vec<(String, String)> = Vec::new();
    let mut seen = |what: &str, r: &Response| bodies.push((what.to_string(), r.body.clone()));

    // The model file: the forbidden one is a 404 like a missing one (no bytes), the allowed
    // one is served.
    let auth = format!("Bearer {key}");
    let ranged = |name: &str| {
        let h = [("Authorization", auth.as_str()), ("Range", "bytes=0-15")];
        c.try_request("GET", &format!("/models/{name}/file"), None, &h)
            .unwrap()
    };
    let forbidden = ranged("smol2");
    let missing = ranged("nope");
    assert_eq!(forbidden.status, 404, "{}", forbidden.body);
    assert!(!forbidden.body.starts_with("GGUF"), "{}", forbidden.body);
    assert_eq!(
        with_name(&forbidden.body, "smol2"),
        with_name(&missing.body, "nope")
    );
    // The "available" list names only the allowed model.
    assert!(!missing.body.contains("smol2"), "{}", missing.body);
    seen("/models/smol2/file", &forbidden);
    let allowed = ranged("smol");
    assert_eq!(allowed.status, 206, "{}", allowed.body);
    assert!(allowed.body.starts_with("GGUF"));
    // HEAD too.
    let h = [("Authorization", auth.as_str())];
    let head = c
        .try_request("HEAD", "/models/smol2/file", None, &h)
        .unwrap();
    assert_eq!(head.status, 404);
    // An admin (no tenant) still downloads it.
    let admin_auth = format!("Bearer {admin}");
    let h = [
        ("Authorization", admin_auth.as_str()),
        ("Range", "bytes=0-3"),
    ];
    let r = c
        .try_request("GET", "/models/smol2/file", None, &h)
        .unwrap();
    assert_eq!(r.status, 206, "{}", r.body);

    // Lists: the forbidden model is absent; the admin's lists hold both.
    let r = get(&c, &key, "/models");
    seen("/models", &r);
    assert_eq!(listed(&r, "models", "name"), ["smol"]);
    let r = get(&c, &key, "/v1/models");
    seen("/v1/models", &r);
    assert_eq!(listed(&r, "data", "id"), ["smol"]);
    let r = get(&c, &key, "/api/tags");
    seen("/api/tags", &r);
    assert_eq!(listed(&r, "models", "name"), ["smol:latest"]);
    let r = get(&c, &key, "/api/models");
    seen("/api/models", &r);
    assert_eq!(listed(&r, "models", "name"), ["smol"]);
    assert!(!r.body.contains("smol2"), "{}", r.body);
    let r = get(&c, &admin, "/v1/models");
    assert_eq!(listed(&r, "data", "id"), ["smol", "smol2"]);

    // Look-ups: 404, the same as for a missing name, never naming the forbidden model.
    let forbidden = get(&c, &key, "/v1/models/smol2");
    let missing = get(&c, &key, "/v1/models/nope");
    assert_eq!(forbidden.status, 404, "{}", forbidden.body);
    assert_eq!(
        with_name(&forbidden.body, "smol2"),
        with_name(&missing.body, "nope")
    );
    assert!(!missing.body.contains("smol2"), "{}", missing.body);
    seen("/v1/models/smol2", &forbidden);
    assert_eq!(get(&c, &key, "/v1/models/smol").status, 200);
    let forbidden = post(&c, &key, "/api/show", json!({"model": "smol2"}));
    let missing = post(&c, &key, "/api/show", json!({"model": "nope"}));
    assert_eq!(forbidden.status, 404, "{}", forbidden.body);
    assert_eq!(
        with_name(&forbidden.body, "smol2"),
        with_name(&missing.body, "nope")
    );
    assert!(!missing.body.contains("smol2"), "{}", missing.body);
    seen("/api/show smol2", &forbidden);
    let shown = post(&c, &key, "/api/show", json!({"model": "smol"}));
    assert_eq!(shown.status, 200, "{}", shown.body);
    seen("/api/show smol", &shown);
    // Unloading by `keep_alive: 0` is a look-up too.
    let r = post(
        &c,
        &key,
        "/api/generate",
        json!({"model": "smol2", "keep_alive": 0}),
    );
    assert_eq!(r.status, 404, "{}", r.body);

    // Generation, embeddings, the chat UI's load, an A/B arm: 403 with the tenant's message,
    // and the same for a name that does not exist (so existence is not revealed there either).
    let msgs = json!([{"role": "user", "content": "Hi"}]);
    let r = post(
        &c,
        &admin,
        "/api/v1/ab",
        json!({"name": "arms", "model_a": "smol2", "model_b": "smol", "share_b": 0.0}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let ab = format!("ab:{}", r.json()["id"].as_str().unwrap());
    for model in ["smol2", "nope", ab.as_str()] {
        for (path, body) in [
            (
                "/v1/chat/completions",
                json!({"model": model, "max_tokens": 1, "messages": msgs}),
            ),
            (
                "/api/generate",
                json!({"model": model, "stream": false, "prompt": "Hi",
                       "options": {"num_predict": 1}}),
            ),
            ("/v1/embeddings", json!({"model": model, "input": "Hi"})),
            ("/api/models/load", json!({"model": model})),
            (
                "/v1/responses",
                json!({"model": model, "input": "Hi", "max_output_tokens": 1}),
            ),
        ] {
            let r = post(&c, &key, path, body);
            assert_eq!(r.status, 403, "{model} {path}: {}", r.body);
            assert!(r.body.contains("acme"), "{model} {path}: {}", r.body);
        }
    }
    let r = post(
        &c,
        &key,
        "/v1/chat/completions",
        json!({"model": "smol", "max_tokens": 1, "messages": msgs}),
    );
    assert_eq!(r.status, 200, "{}", r.body);

    // Running models: the admin loads smol2 by that name; the tenant's /api/ps does not show it.
    let r = post(
        &c,
        &admin,
        "/api/generate",
        json!({"model": "smol2", "stream": false, "prompt": "Hi", "options": {"num_predict": 1}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = get(&c, &admin, "/api/ps");
    assert!(r.body.contains("smol2"), "{}", r.body);
    let r = get(&c, &key, "/api/ps");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.contains("smol2"), "{}", r.body);
    seen("/api/ps", &r);

    // No absolute path in any body, the admin's model routes included.
    for path in [
        "/api/v1/models/library",
        "/api/v1/models/smol/modelfile",
        "/api/models",
        "/models",
    ] {
        let r = get(&c, &admin, path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        seen(path, &r);
    }
    let r = post(&c, &admin, "/api/show", json!({"model": "smol2"}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["modelfile"].as_str().unwrap().starts_with("FROM "));
    seen("/api/show (admin)", &r);
    let r = get(&c, &admin, "/play/pkg/nothing.js");
    seen("/play/pkg/nothing.js", &r);
    let r = get(&c, &admin, "/play/nothing.html");
    seen("/play/nothing.html", &r);
    // The source tree too (the /play/ pages' folder lives there in a test build).
    let tree = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .display()
        .to_string();
    for (what, body) in &bodies {
        assert!(!body.contains(&tree), "{what} shows a folder: {body}");
        for p in [abs.display().to_string(), file.display().to_string()] {
            assert!(!body.contains(&p), "{what} shows the model's path: {body}");
        }
        for d in [&folder, &given_folder] {
            assert!(!body.contains(d.as_str()), "{what} shows a folder: {body}");
        }
    }
}
