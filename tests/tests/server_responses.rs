//! The Responses API (`/v1/responses`) on Qwen 2.5: the raw SSE framing (an `event:` line
//! naming each event's type), stored streamed responses, 404s in OpenAI's shape, the OpenAPI
//! document, a disconnect cancelling generation, and then everything the official `openai`
//! client does with it (tests/py/responses_client.py). Greedy throughout.

use std::io::Read;

use serde_json::{json, Value};
use weft_core::test_support::model_path;
use weft_tests::{python, send, Server};

/// `(event name, data)` of each SSE frame of a body.
fn typed_frames(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|f| f.contains("data:"))
        .map(|f| {
            let line = |p: &str| {
                f.lines()
                    .find_map(|l| l.strip_prefix(p))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default()
            };
            let data: Value = serde_json::from_str(&line("data:")).unwrap();
            (line("event:"), data)
        })
        .collect()
}

fn metric(server: &Server, name: &str) -> u64 {
    server.request("GET", "/v1/metrics", None).json()[name]
        .as_u64()
        .unwrap()
}

#[test]
fn responses_api_with_the_openai_client() {
    let Some(model) = model_path("qwen2") else {
        return;
    };
    let server = Server::start(
        &model,
        &["--ctx", "2048", "--parallel", "2", "--alias", "qwen"],
    );

    // Typed SSE: each frame's `event:` is its data's `type`; the stored response is the
    // final event's.
    let body = json!({"model": "qwen", "input": "Say hello.", "temperature": 0,
                      "max_output_tokens": 12, "stream": true});
    let r = server.request("POST", "/v1/responses", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let frames = typed_frames(&r.body);
    assert!(frames.len() >= 10, "{}", r.body);
    for (i, (name, data)) in frames.iter().enumerate() {
        assert_eq!(data["type"], name.as_str(), "{data}");
        assert_eq!(data["sequence_number"], i, "{data}");
    }
    assert_eq!(frames[0].0, "response.created");
    let last = &frames.last().unwrap().1["response"];
    assert!(
        ["completed", "incomplete"].contains(&last["status"].as_str().unwrap()),
        "{last}"
    );
    let id = last["id"].as_str().unwrap();
    let got = server.request("GET", &format!("/v1/responses/{id}"), None);
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.json()["output"], last["output"]);

    // Unknown ids: 404 in OpenAI's shape.
    for (method, path) in [
        ("GET", "/v1/responses/resp_nope"),
        ("DELETE", "/v1/responses/resp_nope"),
        ("GET", "/v1/responses/resp_nope/input_items"),
    ] {
        let r = server.request(method, path, None);
        assert_eq!(r.status, 404, "{method} {path}: {}", r.body);
        assert_eq!(r.json()["error"]["type"], "not_found_error", "{}", r.body);
    }
    let bad = server.request(
        "GET",
        &format!("/v1/responses/{id}/input_items?limit=500"),
        None,
    );
    assert_eq!(bad.status, 400, "{}", bad.body);

    // The OpenAPI document has the routes and their types.
    let api = server.request("GET", "/openapi.json", None).json();
    for p in [
        "/v1/responses",
        "/v1/responses/{id}",
        "/v1/responses/{id}/input_items",
    ] {
        assert!(api["paths"].get(p).is_some(), "openapi lacks {p}");
    }
    assert!(api["paths"]["/v1/responses/{id}"].get("delete").is_some());
    for s in ["CreateRequest", "ResponseObject", "StreamEvent", "Item"] {
        assert!(
            api["components"]["schemas"].get(s).is_some(),
            "openapi has no schema {s}"
        );
    }

    // A client that goes away mid-stream cancels its generation.
    let cancelled = metric(&server, "requests_cancelled_total");
    let body = json!({"model": "qwen", "input": "Count from 1 to 500, one number a line.",
                      "temperature": 0, "max_output_tokens": 1500, "stream": true});
    let mut s = server.connect().unwrap();
    send(
        &mut s,
        "POST",
        "/v1/responses",
        Some(body.to_string().as_bytes()),
        &[],
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut chunk = [0u8; 512];
    while !String::from_utf8_lossy(&seen).contains("response.output_text.delta") {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&chunk[..n]);
    }
    drop(s);
    let mut tries = 0;
    while metric(&server, "requests_cancelled_total") == cancelled
        || metric(&server, "requests_running") != 0
    {
        tries += 1;
        assert!(tries < 6000, "the dropped stream was never cancelled");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    if let Some(out) = python(
        "responses_client.py",
        &server.base(),
        &["qwen"],
        &["openai", "pydantic"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
    assert_eq!(server.request("GET", "/health", None).status, 200);
}
