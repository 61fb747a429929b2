//! Moderation rules on the three chat surfaces (OpenAI `/v1/chat/completions`, Ollama
//! `/api/chat`, the chat-UI stream), streamed and not: an input keyword blocks before anything
//! runs, an output keyword blocks the reply where the model writes it (greedy SmolLM2 answers
//! "What color is the sky?" with "… a beautiful shade of blue …"), and a flag lets the request
//! through and leaves an audit row naming the rule and the key id, not the text. Plus the
//! rules' bad inputs and the `moderation` setting switching them off.

use serde_json::{json, Value};

use crate::harness::{api_key, call, Db};
use crate::on_both;
use weft_tests::Client;

on_both!(
    moderation_blocks_and_flags,
    moderation_blocks_and_flags_sqlite,
    moderation_blocks_and_flags_postgres
);
on_both!(
    moderation_rule_inputs,
    moderation_rule_inputs_sqlite,
    moderation_rule_inputs_postgres
);

const SKY: &str = "What color is the sky?";

/// Adds a rule; returns its id.
pub fn add_rule(c: &Client, admin: &str, pattern: &str, action: &str, applies_to: &str) -> String {
    let body =
        json!({"pattern": pattern, "kind": "keyword", "action": action, "applies_to": applies_to});
    let r = call(
        c,
        admin,
        "POST",
        "/api/v1/moderation/rules",
        Some(&body.to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()["id"].as_str().unwrap().to_string()
}

/// A chat request to one surface, greedy and short.
fn ask(c: &Client, key: &str, surface: &str, text: &str, stream: bool) -> weft_tests::Response {
    let messages = json!([{"role": "user", "content": text}]);
    let (path, body) = match surface {
        "openai" => (
            "/v1/chat/completions",
            json!({"model": "smol", "messages": messages, "max_tokens": 30,
                   "temperature": 0, "stream": stream}),
        ),
        "ollama" => (
            "/api/chat",
            json!({"model": "smol", "messages": messages, "stream": stream,
                   "options": {"num_predict": 30, "temperature": 0}}),
        ),
        _ => (
            "/api/chat",
            json!({"messages": messages, "maxTokens": 30, "temperature": 0, "newChat": true}),
        ),
    };
    call(c, key, "POST", path, Some(&body.to_string()))
}

/// The text a response delivered, and its error message if it ended with one.
fn delivered(surface: &str, stream: bool, r: &weft_tests::Response) -> (String, Option<String>) {
    let frames: Vec<Value> = match (surface, stream) {
        ("ollama", true) => r
            .body
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        ("openai", true) | ("ui", _) => r
            .sse_data()
            .iter()
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect(),
        _ => vec![r.json()],
    };
    let mut text = String::new();
    let mut error = None;
    for f in &frames {
        let piece = match surface {
            "openai" => f["choices"][0]["delta"]["content"]
                .as_str()
                .or(f["choices"][0]["message"]["content"].as_str()),
            "ollama" => f["message"]["content"].as_str(),
            _ => f["token"].as_str(),
        };
        text.push_str(piece.unwrap_or(""));
        let e = &f["error"];
        if let Some(m) = e.as_str().or(e["message"].as_str()) {
            if surface == "openai" {
                assert_eq!(e["code"], "content_policy_violation", "{f}");
            }
            error = Some(m.to_string());
        }
    }
    (text, error)
}

fn moderation_blocks_and_flags(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let (user_id, user) = api_key(&c, &admin, json!({"name": "u", "role": "user"}));
    let forbid = add_rule(&c, &admin, "forbidden", "block", "input");
    let blue = add_rule(&c, &admin, "blue", "block", "output");
    let hello = add_rule(&c, &admin, "hello", "flag", "both");
    let r = call(&c, &admin, "GET", "/api/v1/moderation/rules", None);
    assert_eq!(r.json()["data"].as_array().unwrap().len(), 3, "{}", r.body);

    for (surface, stream) in [
        ("openai", false),
        ("openai", true),
        ("ollama", false),
        ("ollama", true),
        ("ui", true),
    ] {
        let what = format!("{surface} stream={stream}");
        // Input: blocked before generation, a 400 in the surface's shape.
        let r = ask(&c, &user, surface, "Tell me something FORBIDDEN.", stream);
        assert_eq!(r.status, 400, "{what}: {}", r.body);
        let e = &r.json()["error"];
        match surface {
            "openai" => assert_eq!(e["code"], "content_policy_violation", "{what}: {e}"),
            _ => assert!(e.as_str().unwrap().contains(&forbid), "{what}: {e}"),
        }
        // Output: a 400 unstreamed; streamed, the text before the match, then an error event.
        let r = ask(&c, &user, surface, SKY, stream);
        if stream {
            assert_eq!(r.status, 200, "{what}: {}", r.body);
        } else {
            assert_eq!(r.status, 400, "{what}: {}", r.body);
        }
        let (text, error) = delivered(surface, stream, &r);
        let error = error.unwrap_or_else(|| panic!("{what}: no error in {}", r.body));
        assert!(error.contains(&blue), "{what}: {error}");
        assert!(!text.to_lowercase().contains("blu"), "{what}: {text}");
        if stream {
            assert!(
                text.contains("sky"),
                "{what}: the text before the match: {text}"
            );
        }
        // Flag: the reply goes through.
        let r = ask(&c, &user, surface, "Say the word hello.", stream);
        assert_eq!(r.status, 200, "{what}: {}", r.body);
        let (text, error) = delivered(surface, stream, &r);
        assert!(error.is_none(), "{what}: {}", r.body);
        assert!(text.to_lowercase().contains("hello"), "{what}: {text}");
    }

    // One flag row per request and side (input and output here), naming the rule and the
    // key, never the text.
    let rows = call(&c, &admin, "GET", "/api/v1/audit?limit=1000", None).json();
    let flags: Vec<&Value> = rows["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["details"]["moderation"] == "flag")
        .collect();
    let count = |side: &str| {
        flags
            .iter()
            .filter(|r| r["details"]["applies_to"] == side)
            .count()
    };
    assert_eq!((count("input"), count("output")), (5, 5), "{flags:?}");
    for f in &flags {
        assert_eq!(f["details"]["rule"], hello.as_str(), "{f}");
        assert_eq!(f["actor"], user_id.as_str(), "{f}");
        assert!(
            !f.to_string().to_lowercase().contains("say the word"),
            "{f}"
        );
    }

    // The `moderation` setting off: the rules stay but do not apply; on again, they do.
    let off = call(
        &c,
        &admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"moderation": false}"#),
    );
    assert_eq!(off.status, 200, "{}", off.body);
    assert_eq!(ask(&c, &user, "openai", "forbidden", false).status, 200);
    let on = call(
        &c,
        &admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"moderation": null}"#),
    );
    assert_eq!(on.status, 200, "{}", on.body);
    assert_eq!(ask(&c, &user, "openai", "forbidden", false).status, 400);

    // Deleted: no longer applied.
    let r = call(
        &c,
        &admin,
        "DELETE",
        &format!("/api/v1/moderation/rules/{forbid}"),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(ask(&c, &user, "openai", "forbidden", false).status, 200);
}

fn moderation_rule_inputs(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let (_, user) = api_key(&c, &admin, json!({"name": "u", "role": "user"}));
    let rule = |p: &str, k: &str, a: &str, t: &str| {
        json!({"pattern": p, "kind": k, "action": a, "applies_to": t}).to_string()
    };
    let cases: Vec<(String, &str)> = vec![
        (
            rule("(unclosed", "regex", "block", "input"),
            "unclosed group",
        ),
        (
            rule("a{1000}{1000}", "regex", "block", "input"),
            "size limit",
        ),
        (rule("x*", "regex", "block", "input"), "empty"),
        (rule("x", "glob", "block", "input"), "unknown kind"),
        (rule("x", "keyword", "warn", "input"), "unknown action"),
        (
            rule("x", "keyword", "block", "everything"),
            "unknown applies_to",
        ),
        (rule("  ", "keyword", "block", "input"), "pattern"),
        (
            rule(&"x".repeat(1001), "keyword", "block", "input"),
            "pattern",
        ),
        (
            r#"{"pattern": "x", "kind": "keyword"}"#.into(),
            "missing field",
        ),
        (
            r#"{"pattern": 5, "kind": "keyword", "action": "block", "applies_to": "input"}"#.into(),
            "invalid type",
        ),
        ("{oops".into(), ""),
    ];
    for (body, says) in &cases {
        let r = call(&c, &admin, "POST", "/api/v1/moderation/rules", Some(body));
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let msg = r.json()["error"].as_str().unwrap().to_string();
        assert!(msg.contains(says), "{body}: {msg}");
    }
    let r = call(
        &c,
        &admin,
        "DELETE",
        "/api/v1/moderation/rules/rule_nope",
        None,
    );
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.json()["error"].is_string(), "{}", r.body);
    // Admin only.
    let r = call(
        &c,
        &user,
        "POST",
        "/api/v1/moderation/rules",
        Some(&rule("x", "keyword", "block", "input")),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(
        call(&c, &user, "GET", "/api/v1/moderation/rules", None).status,
        403
    );
    // A valid regex rule works on raw prompts too (completions and Ollama generate).
    let r = call(
        &c,
        &admin,
        "POST",
        "/api/v1/moderation/rules",
        Some(&rule(r"\bsecret-\d+\b", "regex", "block", "input")),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let r = call(
        &c,
        &user,
        "POST",
        "/v1/completions",
        Some(r#"{"model": "smol", "prompt": "the code is secret-42", "max_tokens": 2}"#),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "content_policy_violation");
    let r = call(
        &c,
        &user,
        "POST",
        "/api/generate",
        Some(r#"{"model": "smol", "prompt": "the code is secret-42", "stream": false}"#),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.json()["error"].is_string(), "{}", r.body);
    let r = call(
        &c,
        &user,
        "POST",
        "/v1/completions",
        Some(r#"{"model": "smol", "prompt": "the code is secret-x", "max_tokens": 2}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // The server keeps serving.
    assert_eq!(call(&c, "", "GET", "/health", None).status, 200);
}
