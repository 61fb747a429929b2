//! Tool calling and structured output through the official `openai` and `ollama` Python
//! clients (tests/py/tools_client.py), on Qwen 2.5 (its chat template renders `tools` and the
//! model answers with `<tool_call>` blocks). Greedy throughout, so the checks are exact.

use weft_core::test_support::model_path;
use weft_tests::{python, Server};

#[test]
fn tools_and_structured_output_with_real_clients() {
    let Some(model) = model_path("qwen2") else {
        return;
    };
    let server = Server::start(
        &model,
        &["--ctx", "1024", "--parallel", "2", "--alias", "qwen"],
    );
    if let Some(out) = python(
        "tools_client.py",
        &server.base(),
        &["qwen"],
        &["openai", "ollama"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
    assert_eq!(server.request("GET", "/health", None).status, 200);
}

/// `tool_choice` "required" and a named function force a call whose arguments follow the
/// tool's schema (tests/py/tool_choice_client.py), streaming and not; bad choices are 400.
#[test]
fn forced_tool_calls_with_the_openai_client() {
    let Some(model) = model_path("qwen2") else {
        return;
    };
    let server = Server::start(
        &model,
        &["--ctx", "1024", "--parallel", "2", "--alias", "qwen"],
    );
    // Qwen's template renders tools, so /api/show says so.
    let show = server
        .request("POST", "/api/show", Some(r#"{"model": "qwen"}"#))
        .json();
    assert_eq!(
        show["capabilities"],
        serde_json::json!(["completion", "tools"]),
        "{show}"
    );
    // Without Python: the raw reply to a forced call, and the 400 for an unknown name.
    let body = r#"{"model": "qwen", "temperature": 0, "max_tokens": 64,
        "messages": [{"role": "user", "content": "Tell me a joke."}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
            {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}"#;
    let r = server.request("POST", "/v1/chat/completions", Some(body));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{v}");
    let call = &choice["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "get_weather", "{v}");
    let args: serde_json::Value =
        serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert!(args["city"].is_string(), "{args}");
    assert_eq!(args.as_object().unwrap().len(), 1, "{args}");
    let bad = body.replace(r#""name": "get_weather"}}"#, r#""name": "nope"}}"#);
    let r = server.request("POST", "/v1/chat/completions", Some(&bad));
    assert_eq!(r.status, 400);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains("\"nope\"") && msg.contains("get_weather"),
        "{msg}"
    );

    if let Some(out) = python(
        "tool_choice_client.py",
        &server.base(),
        &["qwen"],
        &["openai"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
}
