//! Reasoning output and the rest of the chat-UI protocol, on Qwen2.5-Coder 0.5B:
//! - `tests/py/reasoning_client.py` makes a thinking model of it with the real `ollama` client
//!   (a Qwen3 / DeepSeek-R1-style template) and checks `message.thinking`, `reasoning_content`,
//!   `think: false`, the switches, and usage on OpenAI's final stream chunk;
//! - the chat-UI stream sends `thinking` frames for that model's reasoning and `token` frames for
//!   its answer, never a tag in either;
//! - the chat UI takes `tools` and answers a call with a `tool_calls` frame, which the session
//!   remembers for the next turn;
//! - a chat-UI request that waits for a slot gets `queue_position` frames before its tokens.
//!
//! Greedy decoding throughout.

use std::io::{BufRead, BufReader};

use serde_json::{json, Value};
use weft_core::test_support::model_path;
use weft_tests::{python, send, Server};

/// The `data:` frames of a chat-UI response, parsed.
fn frames(r: &weft_tests::Response) -> Vec<Value> {
    assert_eq!(r.status, 200, "{}", r.body);
    r.sse_data()
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[test]
fn reasoning_tools_and_queue_frames() {
    let Some(model) = model_path("qwen2") else {
        return;
    };
    let server = Server::start(
        &model,
        &["--ctx", "2048", "--parallel", "1", "--alias", "qwen"],
    );
    let Some(out) = python(
        "reasoning_client.py",
        &server.base(),
        &["qwen"],
        &["openai", "ollama"],
    ) else {
        return;
    };
    assert!(out.contains("ALL OK"), "{out}");
    // The Ollama split the script printed, to compare with the chat UI's.
    let split: Value = out
        .lines()
        .find_map(|l| l.strip_prefix("SPLIT "))
        .map(|j| serde_json::from_str(j).unwrap())
        .expect("the script prints the split");

    // --- Chat UI on the thinking model (made by the script): thinking frames, then tokens.
    let ask = json!([
        {"role": "system", "content": "You are a helpful assistant. First reason step by step inside <think> and </think>. After </think>, always write the final answer."},
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": "<think>\n2 plus 3 is 5.\n</think>\n\nThe answer is 5."},
        {"role": "user", "content": "What is 4 + 4?"}
    ]);
    let sid = server.request("POST", "/api/sessions", None).json()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let body = json!({"modelName": "thinker", "sessionId": sid, "messages": ask, "maxTokens": 48,
                      "temperature": 0, "think": true});
    let fs = frames(&server.request("POST", "/api/chat", Some(&body.to_string())));
    let thinking: String = fs.iter().filter_map(|f| f["thinking"].as_str()).collect();
    let answer: String = fs.iter().filter_map(|f| f["token"].as_str()).collect();
    let first_token = fs.iter().position(|f| f.get("token").is_some());
    let last_thinking = fs.iter().rposition(|f| f.get("thinking").is_some());
    assert!(
        !thinking.trim().is_empty() && !answer.trim().is_empty(),
        "{fs:?}"
    );
    assert!(last_thinking < first_token, "reasoning comes first: {fs:?}");
    for t in ["<think>", "</think>"] {
        assert!(!thinking.contains(t) && !answer.contains(t), "{fs:?}");
    }
    assert_eq!(
        (split["thinking"].as_str(), split["answer"].as_str()),
        (Some(thinking.as_str()), Some(answer.as_str())),
        "the chat UI splits as Ollama does"
    );
    assert_eq!(fs.last().unwrap()["done"], true, "{fs:?}");

    // --- Chat UI with the client's tools: a tool_calls frame, remembered by the session.
    let weather = json!({"type": "function", "function": {"name": "get_weather",
        "description": "Get the current weather in a given city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}});
    let sid = server.request("POST", "/api/sessions", None).json()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let body = json!({"sessionId": sid, "maxTokens": 64, "temperature": 0, "tools": [weather],
        "messages": [{"role": "user", "content": "What is the weather like in Paris right now?"}]});
    let fs = frames(&server.request("POST", "/api/chat", Some(&body.to_string())));
    let calls: Vec<&Value> = fs
        .iter()
        .filter(|f| f.get("tool_calls").is_some())
        .collect();
    assert_eq!(calls.len(), 1, "{fs:?}");
    let call = &calls[0]["tool_calls"][0];
    assert_eq!(call["name"], "get_weather", "{fs:?}");
    assert!(
        call["arguments"]["city"]
            .as_str()
            .is_some_and(|c| c.to_lowercase().contains("paris")),
        "{call}"
    );
    assert!(
        fs.iter().all(|f| !f["token"]
            .as_str()
            .is_some_and(|t| t.contains("<tool_call>"))),
        "the call is not shown as text: {fs:?}"
    );
    // The next turn answers the call with a tool message; the session supplies the call.
    let body = json!({"sessionId": sid, "maxTokens": 48, "temperature": 0, "tools": [weather],
        "messages": [{"role": "tool", "content": "{\"temperature\": 21, \"sky\": \"sunny\"}"}]});
    let fs = frames(&server.request("POST", "/api/chat", Some(&body.to_string())));
    let answer: String = fs.iter().filter_map(|f| f["token"].as_str()).collect();
    assert!(
        answer.contains("21") || answer.to_lowercase().contains("sunny"),
        "the answer uses the tool's result: {fs:?}"
    );
    let bad = json!({"sessionId": sid, "maxTokens": 8, "tools": [{"type": "function"}],
        "messages": [{"role": "user", "content": "hi"}]});
    let r = server.request("POST", "/api/chat", Some(&bad.to_string()));
    assert_eq!(r.status, 400, "{}", r.body);

    // --- Queue frames: with one slot busy, a chat-UI request waits and is told its place.
    let mut busy = server.connect().unwrap();
    let long = json!({"model": "qwen", "prompt": "Count: 1, 2, 3,", "max_tokens": 400,
                      "temperature": 0, "ignore_eos": true, "stream": true});
    send(
        &mut busy,
        "POST",
        "/v1/completions",
        Some(long.to_string().as_bytes()),
        &[],
    )
    .unwrap();
    let mut lines = BufReader::new(busy.try_clone().unwrap()).lines();
    // The first generated text means the slot is taken.
    loop {
        let line = lines.next().expect("stream ended").unwrap();
        if line.starts_with("data: ")
            && line.contains("\"text\":\"")
            && !line.contains("\"text\":\"\"")
        {
            break;
        }
    }
    let body = json!({"sessionId": null, "maxTokens": 4, "temperature": 0,
        "messages": [{"role": "user", "content": "Say hi."}]});
    let fs = frames(&server.request("POST", "/api/chat", Some(&body.to_string())));
    let queued = fs
        .iter()
        .position(|f| f.get("queue_position").is_some())
        .unwrap_or_else(|| panic!("no queue frame: {fs:?}"));
    assert_eq!(fs[queued]["queue_position"], 1, "{fs:?}");
    assert!(fs[queued]["queue_pending"].as_u64() >= Some(1), "{fs:?}");
    let first_token = fs.iter().position(|f| f.get("token").is_some());
    assert!(first_token.is_none_or(|t| t > queued), "{fs:?}");
    assert_eq!(fs.last().unwrap()["done"], true, "{fs:?}");
    drop(lines);
    drop(busy);
    assert_eq!(server.request("GET", "/health", None).status, 200);
}
