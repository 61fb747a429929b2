//! `weft serve` over plain HTTP: the chat-UI SSE protocol with sessions and KV reuse, the ops
//! routes, a table of bad inputs (status and error shape per API; the server keeps serving),
//! and readiness when the model cannot load.

use serde_json::{json, Value};
use weft_core::test_support::model_path;
use weft_tests::Server;

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

/// Parses the chat-UI SSE body: (visible text, terminal frame).
fn ui_frames(body: &weft_tests::Response) -> (String, Value) {
    assert_eq!(body.status, 200, "{}", body.body);
    let frames: Vec<Value> = body
        .sse_data()
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let last = frames.last().cloned().expect("no frames");
    assert_eq!(last["done"], true, "{last}");
    let text = frames.iter().filter_map(|f| f["token"].as_str()).collect();
    (text, last)
}

#[test]
fn chat_ui_ops_and_bad_inputs() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let server = Server::start(
        &model,
        &[
            "--ctx",
            "512",
            "--parallel",
            "2",
            "--alias",
            "smol",
            "--body-limit",
            "65536",
        ],
    );

    // --- Chat-UI protocol: session, two turns, KV reuse reported on the terminal frame.
    let sid = server.request("POST", "/api/sessions", None).json()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let turn1 = json!({"sessionId": sid, "messages": user("Write one sentence about the sea."), "maxTokens": 6});
    let r1 = server.request("POST", "/api/chat", Some(&turn1.to_string()));
    assert!(r1
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let (text1, done1) = ui_frames(&r1);
    assert!(!text1.is_empty());
    for k in [
        "tokenCount",
        "elapsed",
        "tokPerSec",
        "promptTokens",
        "kvReusedTokens",
        "kvReusePercent",
        "sessionId",
        "aborted",
        "error",
    ] {
        assert!(done1.get(k).is_some(), "terminal frame lacks {k}: {done1}");
    }
    assert_eq!(done1["sessionId"], sid.as_str());
    let tc = done1["tokenCount"].as_u64().unwrap();
    assert!((1..=6).contains(&tc), "{done1}");
    // The second turn sends only the new message: the session supplies the history.
    let turn2 =
        json!({"sessionId": sid, "messages": user("And one about the sky."), "maxTokens": 4});
    let (_, done2) = ui_frames(&server.request("POST", "/api/ui/chat", Some(&turn2.to_string())));
    let p1 = done1["promptTokens"].as_u64().unwrap();
    assert!(done2["promptTokens"].as_u64().unwrap() > p1);
    assert!(
        done2["kvReusedTokens"].as_u64().unwrap() >= p1,
        "{done1} {done2}"
    );
    assert!(done2["kvReusePercent"].as_f64().unwrap() > 0.0);
    assert_eq!(
        server
            .request("DELETE", &format!("/api/sessions/{sid}"), None)
            .status,
        200
    );
    assert_eq!(
        server
            .request("DELETE", &format!("/api/sessions/{sid}"), None)
            .status,
        404
    );

    // --- Ops routes.
    let h = server.request("GET", "/health", None);
    assert_eq!((h.status, h.json()["status"].clone()), (200, json!("ok")));
    let ready = server.request("GET", "/ready", None).json();
    assert_eq!(
        ready,
        json!({"ready": true, "model_loaded": true, "engine_running": true, "error": null})
    );
    let metrics = server.request("GET", "/metrics", None);
    assert!(metrics
        .header("content-type")
        .unwrap()
        .starts_with("text/plain"));
    for name in [
        "weft:prompt_tokens_total",
        "weft:generation_tokens_total",
        "weft:num_requests_running",
        "weft:num_requests_waiting",
        "weft:kv_cache_usage_perc",
        "weft:prefix_cache_hits_total",
        "weft:time_to_first_token_seconds_bucket",
        "weft:inter_token_latency_seconds_count",
    ] {
        assert!(metrics.body.contains(name), "/metrics lacks {name}");
    }
    let hits: f64 = metrics
        .body
        .lines()
        .find_map(|l| l.strip_prefix("weft:prefix_cache_hits_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(hits >= p1 as f64);
    let api = server.request("GET", "/openapi.json", None).json();
    assert_eq!(api["openapi"], "3.1.0");
    for p in [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/models/{id}",
        "/api/chat",
        "/api/ui/chat",
        "/api/tags",
        "/api/v1/models/library",
        "/api/v1/models/{id}/modelfile",
        "/metrics",
        "/health",
    ] {
        assert!(api["paths"].get(p).is_some(), "openapi lacks {p}");
    }
    // The document comes from the typed bodies: request and response schemas, both error
    // shapes, and a request body reference on the chat route.
    let schemas = &api["components"]["schemas"];
    for s in [
        "ChatRequest",
        "ChatCompletion",
        "ChatCompletionChunk",
        "Frame",
        "TagsResponse",
        "UiChatRequest",
        "OpenAiErrorBody",
        "PlainErrorBody",
    ] {
        assert!(schemas.get(s).is_some(), "openapi has no schema {s}");
    }
    let chat_body = &api["paths"]["/v1/chat/completions"]["post"]["requestBody"];
    assert!(chat_body.to_string().contains("ChatRequest"), "{chat_body}");
    // The request's own fields, beside those it shares with the completions request (`allOf`).
    let has_field = |schema: &serde_json::Value, field: &str| {
        let parts = schema["allOf"].as_array().cloned().unwrap_or_default();
        std::iter::once(schema.clone())
            .chain(parts)
            .any(|p| p["properties"].get(field).is_some())
    };
    assert!(
        has_field(&schemas["ChatRequest"], "messages"),
        "{}",
        schemas["ChatRequest"]
    );
    assert!(has_field(&schemas["OllamaChatRequest"], "messages"));
    let ollama_chat = &api["paths"]["/api/chat/ollama"]["post"]["requestBody"];
    assert!(
        ollama_chat.to_string().contains("OllamaChatRequest"),
        "{ollama_chat}"
    );
    // Every response carries a request id: the client's own, or one the server made.
    let mine = server
        .try_request("GET", "/health", None, &[("x-request-id", "test-id-42")])
        .unwrap();
    assert_eq!(mine.header("x-request-id"), Some("test-id-42"));
    let made = server.request("GET", "/health", None);
    assert!(made.header("x-request-id").is_some_and(|v| !v.is_empty()));
    let models = server.request("GET", "/api/models", None).json();
    assert_eq!(
        (models["model"].clone(), models["backend"].clone()),
        (json!("smol"), json!("cpu"))
    );
    let q = server.request("GET", "/api/queue/status", None).json();
    assert_eq!(q["pending_requests"], 0);

    // --- Bad inputs: (method, path, body, status). Every one gets its API's error shape.
    let long_prompt = "word ".repeat(2000);
    let huge = format!(
        "{{\"model\":\"smol\",\"prompt\":\"{}\"}}",
        "x".repeat(100_000)
    );
    let msgs = user("hi");
    let chat = |extra: Value| {
        let mut b = json!({"model": "smol", "messages": msgs, "max_tokens": 2});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b.to_string()
    };
    let cases: Vec<(&str, &str, String, u16)> = vec![
        ("POST", "/v1/chat/completions", "not json".into(), 400),
        ("POST", "/v1/chat/completions", "[1,2]".into(), 400),
        (
            "POST",
            "/v1/chat/completions",
            json!({"model": "smol", "messages": "hi"}).to_string(),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            json!({"model": "smol", "messages": []}).to_string(),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"model": "nope"})),
            404,
        ),
        (
            "POST",
            "/v1/chat/completions",
            json!({"messages": msgs}).to_string(),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"max_tokens": -5})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"max_tokens": "ten"})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"temperature": -1})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"top_p": 2})),
            400,
        ),
        ("POST", "/v1/chat/completions", chat(json!({"n": 0})), 400),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"logprobs": true, "top_logprobs": 50})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"logit_bias": {"abc": 1}})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"logit_bias": {"999999999": 1}})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"messages": [{"content": "hi"}]})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"messages": [{"role": "user", "content": 5}]})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"stream": "yes"})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"messages": user(&long_prompt)})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"response_format": {"type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "(a)\\1"}}}})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"response_format": {"type": "yaml"}})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(json!({"tools": [{"type": "code_interpreter"}]})),
            400,
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat(
                json!({"tools": [{"type": "function", "function": {"name": "f"}}],
                        "tool_choice": {"type": "function", "function": {"name": "g"}}}),
            ),
            400,
        ),
        ("POST", "/v1/completions", huge, 413),
        (
            "POST",
            "/v1/completions",
            json!({"model": "smol", "prompt": "a", "suffix": "b"}).to_string(),
            400,
        ),
        (
            "POST",
            "/v1/completions",
            json!({"model": "smol"}).to_string(),
            400,
        ),
        (
            "POST",
            "/v1/completions",
            json!({"model": "smol", "prompt": "a", "logprobs": 9}).to_string(),
            400,
        ),
        (
            "POST",
            "/v1/completions",
            json!({"model": "smol", "prompt": [1, -2]}).to_string(),
            400,
        ),
        (
            "POST",
            "/v1/embeddings",
            json!({"model": "smol", "input": []}).to_string(),
            400,
        ),
        ("GET", "/v1/models/nope", String::new(), 404),
        (
            "POST",
            "/v1/detokenize",
            json!({"tokens": [-1]}).to_string(),
            400,
        ),
        ("POST", "/v1/tokenize", json!({}).to_string(), 400),
        (
            "POST",
            "/api/chat",
            json!({"model": "nope", "messages": msgs}).to_string(),
            404,
        ),
        ("POST", "/api/chat", "{bad".into(), 400),
        (
            "POST",
            "/api/chat",
            json!({"model": "smol", "messages": msgs, "format": "yaml"}).to_string(),
            400,
        ),
        (
            "POST",
            "/api/generate",
            json!({"model": "smol", "prompt": "x", "format": {"type": "object", "not": {}}})
                .to_string(),
            400,
        ),
        (
            "POST",
            "/api/chat",
            json!({"model": "smol"}).to_string(),
            400,
        ),
        (
            "POST",
            "/api/generate",
            json!({"model": "smol", "prompt": "x", "options": {"num_predict": "a"}}).to_string(),
            400,
        ),
        (
            "POST",
            "/api/generate",
            json!({"model": "smol", "prompt": "x", "options": {"temperature": -2}}).to_string(),
            400,
        ),
        (
            "POST",
            "/api/generate",
            json!({"model": "smol", "prompt": "x", "images": ["aGk="]}).to_string(),
            400,
        ),
        (
            "POST",
            "/api/generate",
            json!({"prompt": "x"}).to_string(),
            400,
        ),
        ("POST", "/api/show", json!({}).to_string(), 400),
        (
            "POST",
            "/api/ui/chat",
            json!({"sessionId": "nope", "messages": msgs}).to_string(),
            404,
        ),
        (
            "POST",
            "/api/ui/chat",
            json!({"maxTokens": -1, "messages": msgs}).to_string(),
            400,
        ),
        ("DELETE", "/api/sessions/nope", String::new(), 404),
        (
            "POST",
            "/api/embed",
            json!({"model": "smol", "input": [1]}).to_string(),
            400,
        ),
        (
            "POST",
            "/api/embeddings",
            json!({"model": "smol"}).to_string(),
            400,
        ),
        ("GET", "/api/nope", String::new(), 404),
        ("GET", "/nope", String::new(), 404),
    ];
    assert!(cases.len() >= 25);
    for (method, path, body, want) in &cases {
        let body_opt = (!body.is_empty()).then_some(body.as_str());
        let r = server.request(method, path, body_opt);
        assert_eq!(
            r.status,
            *want,
            "{method} {path} {}: {}",
            &body[..body.len().min(80)],
            r.body
        );
        let v = r.json();
        if path.starts_with("/v1") {
            let e = &v["error"];
            assert!(
                e["message"].is_string() && e["type"].is_string() && e.get("code").is_some(),
                "{path}: {v}"
            );
        } else {
            assert!(v["error"].is_string(), "{path}: {v}");
        }
        assert_eq!(server.request("GET", "/health", None).status, 200);
    }
    // As in Ollama, a chat with no messages is not an error: it loads the model and says so.
    let load = server.request(
        "POST",
        "/api/chat",
        Some(&json!({"model": "smol", "messages": []}).to_string()),
    );
    assert_eq!(load.status, 200, "{}", load.body);
    assert_eq!(load.json()["done_reason"], "load", "{}", load.body);
    // And it still generates.
    let ok = server.request("POST", "/v1/chat/completions", Some(&chat(json!({}))));
    assert_eq!(ok.status, 200, "{}", ok.body);
}

#[test]
fn not_ready_when_the_model_cannot_load() {
    let dir = std::env::temp_dir().join(format!("weft-bad-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("broken.gguf");
    std::fs::write(&bad, b"GGUF this is not a model").unwrap();
    let mut child = std::process::Command::new(weft_tests::weft_binary())
        .args(["serve", "--port", "0", "--model"])
        .arg(&bad)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::BufRead;
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines();
    let mut port = 0u16;
    let mut failed = false;
    for line in lines.by_ref().map_while(Result::ok) {
        if let Some(rest) = line.split("listening on http://").nth(1) {
            port = rest
                .split_whitespace()
                .next()
                .unwrap()
                .rsplit(':')
                .next()
                .unwrap()
                .parse()
                .unwrap();
        }
        if line.contains("failed to load") {
            failed = true;
            break;
        }
    }
    assert!(failed && port > 0);
    let get = |path: &str, body: Option<&str>| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        weft_tests::send(
            &mut s,
            if body.is_some() { "POST" } else { "GET" },
            path,
            body.map(str::as_bytes),
            &[],
        )
        .unwrap();
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut s, &mut raw).unwrap();
        weft_tests::Response::parse(&raw)
    };
    let r = get("/ready", None);
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["model_loaded"], false);
    let c = get(
        "/v1/chat/completions",
        Some(&json!({"model": "broken", "messages": user("hi")}).to_string()),
    );
    assert_eq!(c.status, 503, "{}", c.body);
    assert_eq!(get("/health", None).status, 200);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn json_logs_carry_the_request_id_model_and_tokens() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let server = Server::start(
        &model,
        &["--ctx", "256", "--alias", "smol", "--log-format", "json"],
    );
    let body = json!({"model": "smol", "messages": user("Say hi."), "max_tokens": 3,
                      "temperature": 0});
    let r = server
        .try_request(
            "POST",
            "/v1/chat/completions",
            Some(&body.to_string()),
            &[("x-request-id", "log-test-7")],
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let tokens = r.json()["usage"]["completion_tokens"].as_u64().unwrap();
    // The summary event is written when the sequence ends, just before the response does.
    let mut found = None;
    for _ in 0..100 {
        found = server.log().iter().find_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            (v["message"] == "generation finished").then_some(v)
        });
        if found.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let ev = found.expect("no `generation finished` JSON log line");
    assert_eq!(ev["model"], "smol", "{ev}");
    assert_eq!(ev["completion_tokens"].as_u64(), Some(tokens), "{ev}");
    assert!(ev["prompt_tokens"].as_u64().unwrap() > 0, "{ev}");
    assert_eq!(ev["span"]["id"], "log-test-7", "{ev}");
    assert_eq!(ev["span"]["path"], "/v1/chat/completions", "{ev}");
    // Every line is JSON, including the start-up ones.
    for l in server.log() {
        assert!(serde_json::from_str::<Value>(&l).is_ok(), "not JSON: {l}");
    }
}
