//! Stored responses have owners and live in the database (issue 33, failure 2): key B cannot
//! read, list the input of, delete or continue (`previous_response_id`) key A's response —
//! each is the 404 of an id that was never made — and A's responses, whole and streamed,
//! survive a restart of the server. Run on SQLite and on Postgres.

#[path = "server_admin/harness.rs"]
#[allow(dead_code)]
#[macro_use]
mod harness;

use serde_json::{json, Value};

use harness::{api_key, call, Db};
use weft_tests::{Client, Response};

on_both!(
    responses_have_owners,
    responses_have_owners_sqlite,
    responses_have_owners_postgres
);

fn create(c: &Client, key: &str, body: Value) -> Response {
    call(c, key, "POST", "/v1/responses", Some(&body.to_string()))
}

/// The final response of a streamed body (the data of its last event).
fn streamed(r: &Response) -> Value {
    assert_eq!(r.status, 200, "{}", r.body);
    let last = r
        .sse_data()
        .into_iter()
        .rev()
        .find_map(|d| serde_json::from_str::<Value>(&d).ok())
        .expect("no events");
    assert!(
        ["response.completed", "response.incomplete"].contains(&last["type"].as_str().unwrap()),
        "{last}"
    );
    last["response"].clone()
}

/// A body with the id replaced, to compare another principal's answer with a missing id's.
fn with_id(body: &str, id: &str) -> String {
    body.replace(id, "ID")
}

/// What B (or anyone but the owner) gets for each way of reaching response `id`, next to
/// what it gets for an id never made: the same 404s.
fn hidden_from(c: &Client, key: &str, id: &str) {
    let never = "resp_0123456789abcdef0123456789abcdef";
    for (method, path) in [
        ("GET", "/v1/responses/{}"),
        ("GET", "/v1/responses/{}/input_items"),
        ("DELETE", "/v1/responses/{}"),
    ] {
        let theirs = call(c, key, method, &path.replace("{}", id), None);
        let missing = call(c, key, method, &path.replace("{}", never), None);
        assert_eq!(theirs.status, 404, "{method} {path}: {}", theirs.body);
        assert_eq!(theirs.json()["error"]["type"], "not_found_error");
        assert_eq!(
            with_id(&theirs.body, id),
            with_id(&missing.body, never),
            "{method} {path}"
        );
    }
    let follow = |prev: &str| {
        create(
            c,
            key,
            json!({"model": "smol", "input": "And then?", "previous_response_id": prev,
                   "max_output_tokens": 2}),
        )
    };
    let theirs = follow(id);
    let missing = follow(never);
    assert_eq!(theirs.status, 404, "{}", theirs.body);
    assert_eq!(
        theirs.json()["error"]["code"],
        "previous_response_not_found",
        "{}",
        theirs.body
    );
    assert_eq!(with_id(&theirs.body, id), with_id(&missing.body, never));
}

fn responses_have_owners(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let (_, a) = api_key(&c, &admin, json!({"name": "a", "role": "user"}));
    let (_, b) = api_key(&c, &admin, json!({"name": "b", "role": "user"}));

    let r = create(
        &c,
        &a,
        json!({"model": "smol", "input": "The password is swordfish. Say ok.",
               "max_output_tokens": 4, "temperature": 0}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let whole = r.json();
    let r = create(
        &c,
        &a,
        json!({"model": "smol", "input": "Count to three.", "max_output_tokens": 4,
               "temperature": 0, "stream": true}),
    );
    let stream = streamed(&r);
    let ids: Vec<String> = [&whole, &stream]
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect();
    for id in &ids {
        // The owner reads it at once (written before it was answered)...
        let r = call(&c, &a, "GET", &format!("/v1/responses/{id}"), None);
        assert_eq!(r.status, 200, "{}", r.body);
        let r = call(
            &c,
            &a,
            "GET",
            &format!("/v1/responses/{id}/input_items"),
            None,
        );
        assert_eq!(r.status, 200, "{}", r.body);
        // ...nobody else does, an admin key included (it is another principal).
        hidden_from(&c, &b, id);
        hidden_from(&c, &admin, id);
    }
    let items = call(
        &c,
        &a,
        "GET",
        &format!("/v1/responses/{}/input_items", ids[0]),
        None,
    );
    assert!(items.body.contains("swordfish"), "{}", items.body);

    // A restart (the process killed, then started on the same database) keeps them, and
    // keeps them A's.
    drop(server);
    let server = db.serve(&[]);
    let c = server.client();
    for (id, before) in ids.iter().zip([&whole, &stream]) {
        let r = call(&c, &a, "GET", &format!("/v1/responses/{id}"), None);
        assert_eq!(r.status, 200, "after the restart: {}", r.body);
        assert_eq!(r.json()["output"], before["output"], "{}", r.body);
        hidden_from(&c, &b, id);
    }
    // A continues its own response; the follow-up's input holds the first one's.
    let r = create(
        &c,
        &a,
        json!({"model": "smol", "input": "What was the password?", "max_output_tokens": 2,
               "previous_response_id": ids[0]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let next = r.json()["id"].as_str().unwrap().to_string();
    let r = call(
        &c,
        &a,
        "GET",
        &format!("/v1/responses/{next}/input_items?order=asc"),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("swordfish"), "{}", r.body);
    hidden_from(&c, &b, &next);
    // B's delete changed nothing; A's deletes it.
    let r = call(&c, &a, "DELETE", &format!("/v1/responses/{}", ids[0]), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = call(&c, &a, "GET", &format!("/v1/responses/{}", ids[0]), None);
    assert_eq!(r.status, 404, "{}", r.body);
}
