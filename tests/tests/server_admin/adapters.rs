//! LoRA adapters: register, list, get, delete; the checks on registering (base model served,
//! file inside the models store, a GGUF whose `general.type` is `adapter`); and the 501 a
//! request naming an adapter gets (adapters are metadata only).

use std::path::Path;

use serde_json::{json, Value};
use weft_core::gguf::{write_gguf, Value as Gv};

use crate::harness::{call, Db};
use crate::on_both;

on_both!(adapters, adapters_sqlite, adapters_postgres);

/// A GGUF with only metadata (a real LoRA file has tensors too; registering reads the header).
fn gguf(path: &Path, kind: &str) {
    let meta = [
        ("general.architecture", Gv::String("llama".into())),
        ("general.type", Gv::String(kind.into())),
        ("adapter.type", Gv::String("lora".into())),
        ("adapter.lora.alpha", Gv::F32(16.0)),
    ];
    std::fs::write(path, write_gguf(&meta, &[], 32)).unwrap();
}

fn adapters(db: &Db) {
    let store = db.home.join("store");
    // A subfolder: the store's top level is scanned for models.
    std::fs::create_dir_all(store.join("adapters")).unwrap();
    gguf(&store.join("adapters/tiny-lora.gguf"), "adapter");
    gguf(&store.join("adapters/full-model.gguf"), "model");
    std::fs::write(store.join("adapters/notes.gguf"), "not a gguf").unwrap();
    gguf(&db.home.join("outside.gguf"), "adapter");
    let admin = db.cli_key("admin");
    let server = db.serve(&["--models-dir", store.to_str().unwrap()]);
    let c = server.client();
    let post = |body: Value| {
        call(
            &c,
            &admin,
            "POST",
            "/api/v1/adapters",
            Some(&body.to_string()),
        )
    };

    let outside = db.home.join("outside.gguf").display().to_string();
    for (body, status) in [
        (
            json!({"name": "l", "base_model": "nope", "path": "adapters/tiny-lora.gguf"}),
            400,
        ),
        (
            json!({"name": "l", "base_model": "smol", "path": "../outside.gguf"}),
            400,
        ),
        (
            json!({"name": "l", "base_model": "smol", "path": outside}),
            400,
        ),
        (
            json!({"name": "l", "base_model": "smol", "path": "adapters/full-model.gguf"}),
            400,
        ),
        (
            json!({"name": "l", "base_model": "smol", "path": "adapters/notes.gguf"}),
            400,
        ),
        (
            json!({"name": "l", "base_model": "smol", "path": "adapters/missing.gguf"}),
            400,
        ),
        (
            json!({"name": "l", "base_model": "smol", "path": "adapters"}),
            400,
        ),
        (json!({"name": "l", "base_model": "smol", "path": ""}), 400),
        (
            json!({"name": "l", "base_model": "smol", "path": "adapters/tiny-lora.gguf", "scale": "x"}),
            400,
        ),
        (
            json!({"name": "", "base_model": "smol", "path": "adapters/tiny-lora.gguf"}),
            400,
        ),
        (json!({"name": "l", "base_model": "smol"}), 400),
        (
            json!({"name": "smol", "base_model": "smol", "path": "adapters/tiny-lora.gguf"}),
            409,
        ),
    ] {
        let r = post(body.clone());
        assert_eq!(r.status, status, "{body}: {}", r.body);
        assert!(r.json()["error"].is_string(), "{}", r.body);
    }
    let r = post(json!({"name": "tiny-lora", "base_model": "smol",
        "path": "adapters/tiny-lora.gguf", "scale": 0.5}));
    assert_eq!(r.status, 201, "{}", r.body);
    let a = r.json();
    let id = a["id"].as_str().unwrap().to_string();
    assert_eq!(a["base_model"], "smol");
    assert_eq!(a["scale"], 0.5);
    assert!(
        a["path"].as_str().unwrap().ends_with("tiny-lora.gguf"),
        "{a}"
    );
    let dup = json!({"name": "tiny-lora", "base_model": "smol", "path": "adapters/tiny-lora.gguf"});
    assert_eq!(post(dup).status, 409);
    let list = call(&c, &admin, "GET", "/api/v1/adapters", None).json();
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    let got = call(&c, &admin, "GET", &format!("/api/v1/adapters/{id}"), None).json();
    assert_eq!(got["name"], "tiny-lora", "{got}");
    assert_eq!(
        call(&c, &admin, "GET", "/api/v1/adapters/nope", None).status,
        404
    );

    // Using it, by name or id: 501 in each surface's shape.
    let msgs = json!([{"role": "user", "content": "Hi"}]);
    for model in ["tiny-lora", id.as_str()] {
        let r = call(
            &c,
            &admin,
            "POST",
            "/v1/chat/completions",
            Some(&json!({"model": model, "max_tokens": 1, "messages": msgs}).to_string()),
        );
        assert_eq!(r.status, 501, "{}", r.body);
        assert_eq!(r.json()["error"]["code"], "not_implemented", "{}", r.body);
        assert!(r.body.contains("LoRA"), "{}", r.body);
        let r = call(
            &c,
            &admin,
            "POST",
            "/api/chat",
            Some(&json!({"model": model, "stream": false, "messages": msgs}).to_string()),
        );
        assert_eq!(r.status, 501, "{}", r.body);
        assert!(
            r.json()["error"].as_str().unwrap().contains("LoRA"),
            "{}",
            r.body
        );
    }

    // The OpenAPI document covers the new admin routes.
    let api = call(&c, "", "GET", "/openapi.json", None).json();
    for (p, m) in [
        ("/api/v1/adapters", "post"),
        ("/api/v1/adapters/{id}", "delete"),
        ("/api/v1/ab", "post"),
        ("/api/v1/ab/{id}", "get"),
        ("/api/v1/ab/vote", "post"),
        ("/api/v1/tenants/{id}", "patch"),
    ] {
        assert!(api["paths"][p].get(m).is_some(), "openapi lacks {m} {p}");
    }

    let r = call(
        &c,
        &admin,
        "DELETE",
        &format!("/api/v1/adapters/{id}"),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        call(
            &c,
            &admin,
            "DELETE",
            &format!("/api/v1/adapters/{id}"),
            None
        )
        .status,
        404
    );
    assert!(
        store.join("adapters/tiny-lora.gguf").exists(),
        "the file is the operator's"
    );
    let r = call(
        &c,
        &admin,
        "POST",
        "/v1/chat/completions",
        Some(&json!({"model": "tiny-lora", "max_tokens": 1, "messages": msgs}).to_string()),
    );
    assert_eq!(r.status, 404, "{}", r.body);
}
