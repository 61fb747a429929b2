//! Structured output with constrained JSON Schema keywords (bounds, lengths, patterns, formats,
//! nested and recursive models) through the official `openai` client's
//! `chat.completions.parse` with pydantic models and the `ollama` client's `format`
//! (tests/py/structured_client.py), on Qwen 2.5. Greedy throughout.

use weft_core::test_support::model_path;
use weft_tests::{python, Server};

#[test]
fn pydantic_models_with_constraints_through_real_clients() {
    let Some(model) = model_path("qwen2") else {
        return;
    };
    let server = Server::start(
        &model,
        &["--ctx", "1024", "--parallel", "2", "--alias", "qwen"],
    );
    // Without Python: a bounded integer and a patterned string in the raw reply, and the 400
    // for a backreference, in OpenAI's error shape.
    let body = r#"{"model": "qwen", "temperature": 0, "max_tokens": 60,
        "messages": [{"role": "user", "content": "Give a number and a code."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema":
            {"type": "object", "properties": {
                "n": {"type": "integer", "minimum": 10, "maximum": 12},
                "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"}},
             "required": ["n", "code"], "additionalProperties": false}}}}"#;
    let r = server.request("POST", "/v1/chat/completions", Some(body));
    assert_eq!(r.status, 200, "{}", r.body);
    let text = r.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let n = v["n"].as_i64().unwrap();
    assert!((10..=12).contains(&n), "{text}");
    let code = v["code"].as_str().unwrap().as_bytes();
    assert!(
        code.len() == 6
            && code[..2].iter().all(u8::is_ascii_uppercase)
            && code[2] == b'-'
            && code[3..].iter().all(u8::is_ascii_digit),
        "{text}"
    );
    let bad = body.replace(r#"^[A-Z]{2}-\\d{3}$"#, r#"(a)\\1"#);
    let r = server.request("POST", "/v1/chat/completions", Some(&bad));
    assert_eq!(r.status, 400, "{}", r.body);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains("pattern") && msg.contains("backreference"),
        "{msg}"
    );

    if let Some(out) = python(
        "structured_client.py",
        &server.base(),
        &["qwen"],
        &["openai", "ollama", "pydantic", "email_validator"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
}
