//! A/B tests: create/get/delete/vote and their bad inputs, and 200 requests to `ab:<id>`
//! split between the arms by the configured share, with the headers and the real model name.

use serde_json::{json, Value};

use crate::harness::{call, Db};
use crate::on_both;
use weft_tests::Client;

on_both!(ab_tests, ab_tests_sqlite, ab_tests_postgres);

fn post(c: &Client, key: &str, path: &str, body: Value) -> weft_tests::Response {
    call(c, key, "POST", path, Some(&body.to_string()))
}

/// A chat of one generated token through the OpenAI API.
fn chat(c: &Client, key: &str, model: &str) -> weft_tests::Response {
    let body = json!({"model": model, "max_tokens": 1, "temperature": 0,
        "messages": [{"role": "user", "content": "Hi"}]});
    post(c, key, "/v1/chat/completions", body)
}

fn ab_tests(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    // Arm B is an alias of the same file: the body's `model` tells the arms apart.
    let r = post(
        &c,
        &admin,
        "/api/create",
        json!({"model": "smol-b", "from": "smol"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);

    // Bad inputs.
    let bad = [
        (
            json!({"name": "t", "model_a": "nope", "model_b": "smol"}),
            400,
        ),
        (
            json!({"name": "t", "model_a": "smol", "model_b": "ab:x"}),
            400,
        ),
        (
            json!({"name": "t", "model_a": "smol", "model_b": "smol", "share_b": 1.5}),
            400,
        ),
        (
            json!({"name": "t", "model_a": "smol", "model_b": "smol", "share_b": -0.1}),
            400,
        ),
        (
            json!({"name": "t", "model_a": "smol", "model_b": "smol", "share_b": "x"}),
            400,
        ),
        (
            json!({"name": "", "model_a": "smol", "model_b": "smol"}),
            400,
        ),
        (json!({"model_a": "smol", "model_b": "smol"}), 400),
        (
            json!({"name": "t", "model_a": "smol", "model_b": "smol", "extra": 1}),
            400,
        ),
    ];
    for (body, status) in bad {
        let r = post(&c, &admin, "/api/v1/ab", body.clone());
        assert_eq!(r.status, status, "{body}: {}", r.body);
        assert!(r.json()["error"].is_string(), "{}", r.body);
    }
    let r = post(
        &c,
        &admin,
        "/api/v1/ab",
        json!({"name": "smol-vs-b", "model_a": "smol", "model_b": "smol-b", "share_b": 0.3}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let t = r.json();
    let id = t["id"].as_str().unwrap().to_string();
    let model = format!("ab:{id}");
    assert_eq!(t["model"], model.as_str());
    assert_eq!(t["share_b"], 0.3);
    let dup = json!({"name": "smol-vs-b", "model_a": "smol", "model_b": "smol"});
    assert_eq!(post(&c, &admin, "/api/v1/ab", dup).status, 409);
    // A user key may route by the test but not manage it.
    let (_, user) = crate::harness::api_key(&c, &admin, json!({"name": "u", "role": "user"}));
    assert_eq!(call(&c, &user, "GET", "/api/v1/ab", None).status, 403);

    // 200 requests with B at 30 %.
    let (mut a, mut b) = (0, 0);
    for i in 0..200 {
        let r = chat(&c, &user, &model);
        assert_eq!(r.status, 200, "request {i}: {}", r.body);
        assert_eq!(r.header("x-ab-test-id"), Some(id.as_str()));
        let (arm, real) = match r.header("x-ab-variant") {
            Some("a") => (&mut a, "smol"),
            Some("b") => (&mut b, "smol-b"),
            v => panic!("X-Ab-Variant {v:?}"),
        };
        *arm += 1;
        assert_eq!(r.json()["model"], real, "{}", r.body);
    }
    let share = f64::from(b) / 200.0;
    assert!(
        (share - 0.3).abs() <= 0.03,
        "B had {b} of 200 requests ({share})"
    );
    let got = call(&c, &admin, "GET", &format!("/api/v1/ab/{id}"), None).json();
    assert_eq!(
        got["requests"],
        json!({"a": a, "b": b, "total": 200}),
        "{got}"
    );

    // The other chat surfaces route too, and so does the X-Ab-Test-Id header.
    let r = post(
        &c,
        &user,
        "/api/chat",
        json!({"model": model, "stream": false,
        "options": {"num_predict": 1}, "messages": [{"role": "user", "content": "Hi"}]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-ab-test-id"), Some(id.as_str()));
    assert!(["smol", "smol-b"]
        .iter()
        .any(|m| r.json()["model"].as_str().unwrap().starts_with(m)));
    let r = post(
        &c,
        &user,
        "/api/generate",
        json!({"model": model, "stream": false,
        "prompt": "Hi", "options": {"num_predict": 1}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        matches!(r.header("x-ab-variant"), Some("a" | "b")),
        "{:?}",
        r.headers
    );
    let auth = format!("Bearer {user}");
    let body = json!({"model": "smol", "max_tokens": 1, "prompt": "Hi"}).to_string();
    let r = c
        .try_request(
            "POST",
            "/v1/completions",
            Some(&body),
            &[
                ("Authorization", auth.as_str()),
                ("X-Ab-Test-Id", id.as_str()),
            ],
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-ab-test-id"), Some(id.as_str()));
    let got = call(&c, &admin, "GET", &format!("/api/v1/ab/{id}"), None).json();
    assert_eq!(got["requests"]["total"], 203, "{got}");

    // Unknown tests.
    let r = chat(&c, &user, "ab:nope");
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "model_not_found", "{}", r.body);
    assert_eq!(call(&c, &admin, "GET", "/api/v1/ab/nope", None).status, 404);
    assert_eq!(
        call(&c, &admin, "DELETE", "/api/v1/ab/nope", None).status,
        404
    );

    // Votes.
    let vote = |body: Value| post(&c, &admin, "/api/v1/ab/vote", body);
    assert_eq!(vote(json!({"test_id": id, "variant": "a"})).status, 201);
    let r = vote(json!({"test_id": id, "winner": "b", "request_id": "req-1"}));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["model"], "smol-b");
    let r = vote(json!({"test_id": id, "preferred": "B", "comment": "shorter"}));
    assert_eq!(
        r.json()["votes"],
        json!({"a": 1, "b": 2, "total": 3}),
        "{}",
        r.body
    );
    for (body, status) in [
        (json!({"test_id": "nope", "variant": "a"}), 404),
        (json!({"test_id": id, "variant": "c"}), 400),
        (json!({"test_id": id}), 400),
        (json!({"test_id": id, "variant": "a", "winner": "b"}), 400),
        (json!({"variant": "a"}), 400),
        (json!({"test_id": id, "variant": 1}), 400),
    ] {
        let r = vote(body.clone());
        assert_eq!(r.status, status, "{body}: {}", r.body);
    }
    let got = call(&c, &admin, "GET", &format!("/api/v1/ab/{id}"), None).json();
    assert_eq!(got["votes"], json!({"a": 1, "b": 2, "total": 3}), "{got}");
    let list = call(&c, &admin, "GET", "/api/v1/ab", None).json();
    assert_eq!(list["data"][0]["id"], id.as_str(), "{list}");

    // Deleting ends the test.
    let r = call(&c, &admin, "DELETE", &format!("/api/v1/ab/{id}"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        call(&c, &admin, "GET", &format!("/api/v1/ab/{id}"), None).status,
        404
    );
    assert_eq!(chat(&c, &user, &model).status, 404);
    let audit = call(&c, &admin, "GET", "/api/v1/audit", None).body;
    assert!(audit.contains("/api/v1/ab/vote"), "{audit}");
}
