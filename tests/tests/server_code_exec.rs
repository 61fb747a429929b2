//! Server-side code execution through `weft serve --code-exec` with Qwen2.5-Coder 0.5B: the
//! official `openai` client asks for a computation (the server runs `run_python` and answers
//! with its result) and for a CSV file (its artifact URL downloads byte for byte, streamed);
//! the chat-UI stream shows `tool_progress` and `skill_step` frames; Ollama's streamed chat
//! ends with the executed calls; an unknown skill is a 400
//! on every chat surface; `/openapi.json` documents the artifact route and the new fields.
//!
//! Needs the model and the sandbox runtimes (`scripts/fetch-models.sh`,
//! `scripts/fetch-sandbox.sh`); skips loudly when one is missing, fails under CI.

use std::path::PathBuf;

use serde_json::{json, Value};
use weft_core::test_support::model_path;
use weft_sandbox::runtimes;
use weft_tests::{python, Server};

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-code-exec-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A system prompt and one worked exchange (a call, its result, the answer): the 0.5B model
/// follows an example far more reliably than instructions (as in tests/py/code_exec_client.py).
fn conversation(question: &str) -> Value {
    // Written as Python's json.dumps writes them, so the prompt is the Python client's.
    let result = r#"{"exit_code": 0, "stdout": "385\n", "stderr": "", "error": null, "files_created": [], "files_modified": []}"#;
    let arguments =
        r#"{"code": "total = 0\nfor n in range(1, 11):\n    total += n * n\nprint(total)"}"#;
    json!([
        {"role": "system", "content": "You are a helpful assistant. Compute with the run_python tool: write a complete program that prints the result, then answer with the printed value."},
        {"role": "user", "content": "Use Python to compute the sum of the squares of 1 to 10."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_ex1", "type": "function",
            "function": {"name": "run_python", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call_ex1", "content": result},
        {"role": "assistant", "content": "The sum of the squares of 1 to 10 is 385."},
        {"role": "user", "content": question},
    ])
}

/// Whether a schema has `field`, directly or through an `allOf` part (a flattened struct is a
/// `$ref` there).
fn has_field(schemas: &Value, schema: &Value, field: &str) -> bool {
    if schema["properties"].get(field).is_some() {
        return true;
    }
    let part = |p: &Value| match p["$ref"].as_str() {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap_or("");
            has_field(schemas, &schemas[name], field)
        }
        None => has_field(schemas, p, field),
    };
    schema["allOf"]
        .as_array()
        .is_some_and(|a| a.iter().any(part))
}

fn ui_frames(body: &weft_tests::Response) -> Vec<Value> {
    body.sse_data()
        .iter()
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect()
}

#[test]
fn code_exec_over_http() {
    let Some(model) = model_path("qwen2") else {
        return;
    };
    if !weft_sandbox::test_support::runtimes_present("code_exec_over_http") {
        return;
    }
    // The runtimes as this process finds them; the server gets a private WEFT_HOME (skills,
    // artifacts), so it is told where they are.
    let sandbox_dir = runtimes::default_dir();
    let home = scratch("home");
    let skills = scratch("skills");
    std::fs::create_dir_all(skills.join("greet")).unwrap();
    std::fs::write(
        skills.join("greet/SKILL.md"),
        "---\nname: greet\ndescription: Greets people politely.\n---\n# greet\n\nSay hello.\n",
    )
    .unwrap();
    let args: Vec<String> = [
        "--model",
        &model.display().to_string(),
        "--ctx",
        "4096",
        "--code-exec",
        "--skills-dir",
        &skills.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let s = Server::start_env(
        &args,
        &[("WEFT_HOME", &home), ("WEFT_SANDBOX_DIR", &sandbox_dir)],
    );
    let name = "qwen2.5-coder-0.5b-instruct-q4_k_m";

    // The document lists the hand-registered artifact route and the skills fields.
    let doc = s.request("GET", "/openapi.json", None).json();
    let art = &doc["paths"]["/api/code/artifacts/{run_id}/{path}"]["get"];
    assert!(art.is_object(), "{}", doc["paths"]);
    assert_eq!(art["tags"][0], "code");
    let schemas = &doc["components"]["schemas"];
    for (schema, field) in [
        ("ChatRequest", "skills"),
        ("OllamaChatRequest", "skills"),
        ("UiChatRequest", "skills_discovery"),
        ("AssistantMessage", "executed_calls"),
        ("ExecutedCall", "output"),
        ("SkillStepFrame", "skill_step"),
        ("ToolProgressFrame", "tool_progress"),
    ] {
        let found = has_field(schemas, &schemas[schema], field);
        assert!(found, "{schema}.{field} missing: {}", schemas[schema]);
    }

    // An unknown skill is a 400 in each surface's error shape, before any generation.
    let bad = |path: &str, body: Value| {
        let r = s.request("POST", path, Some(&body.to_string()));
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert!(r.body.contains("no-such-skill"), "{path}: {}", r.body);
        r.json()
    };
    let msgs = json!([{"role": "user", "content": "hi"}]);
    let e = bad(
        "/v1/chat/completions",
        json!({"model": name, "messages": msgs, "skills": ["no-such-skill"]}),
    );
    assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
    let e = bad(
        "/api/chat",
        json!({"model": name, "messages": msgs, "skills": ["no-such-skill"]}),
    );
    assert!(e["error"].is_string(), "{e}");
    bad(
        "/api/chat",
        json!({"maxTokens": 4, "messages": msgs, "skills": ["no-such-skill"]}),
    );

    // The official client: a computation and a CSV artifact (tests/py/code_exec_client.py).
    if let Some(out) = python("code_exec_client.py", &s.base(), &[name], &["openai"]) {
        assert!(out.contains("ALL OK"), "{out}");
    }

    // The chat-UI stream (`/api/chat` with a chat-UI body): the call's frames, then the answer.
    let body = json!({
        "maxTokens": 120,
        "temperature": 0,
        "messages": conversation("Use Python to compute the 20th Fibonacci number."),
    });
    let r = s.request("POST", "/api/chat", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let frames = ui_frames(&r);
    let kinds: Vec<String> = frames
        .iter()
        .filter_map(|f| {
            f.get("tool_progress")
                .map(|p| format!("progress {}", p.as_str().unwrap()))
                .or_else(|| f.get("skill_step").map(|t| format!("step {t}")))
        })
        .collect();
    // While the model writes the call: `writing` frames whose pieces make up the call's text,
    // naming the tool once the text has its name.
    let writing: Vec<&serde_json::Value> = frames
        .iter()
        .filter(|f| f["tool_progress"] == "writing")
        .collect();
    assert!(!writing.is_empty(), "{frames:?}");
    let written: String = writing
        .iter()
        .map(|f| f["text"].as_str().unwrap())
        .collect();
    assert!(
        written.contains("run_python") && written.contains("\"code\""),
        "{written:?}"
    );
    assert_eq!(writing.last().unwrap()["tool"], "run_python", "{writing:?}");
    let kinds: Vec<String> = kinds
        .into_iter()
        .filter(|k| k != "progress writing")
        .collect();
    let first_running = frames.iter().position(|f| f["tool_progress"] == "running");
    let last_writing = frames.iter().rposition(|f| f["tool_progress"] == "writing");
    assert!(last_writing < first_running, "{frames:?}");
    assert!(
        kinds.starts_with(&[
            "progress running".to_string(),
            "progress finished".to_string(),
            "step \"run_python\"".to_string(),
        ]),
        "{kinds:?}\n{frames:?}"
    );
    let running = frames
        .iter()
        .find(|f| f["tool_progress"] == "running")
        .unwrap();
    assert_eq!(running["tool"], "run_python");
    assert_eq!(running["seconds"], 0.0);
    assert!(
        running["detail"].as_str().unwrap().starts_with("python · "),
        "{running}"
    );
    let finished = frames
        .iter()
        .find(|f| f["tool_progress"] == "finished")
        .unwrap();
    assert!(finished["seconds"].as_f64().unwrap() > 0.0, "{finished}");
    assert!(
        finished["detail"].is_null() && finished["text"] == "",
        "{finished}"
    );
    let text: String = frames.iter().filter_map(|f| f["token"].as_str()).collect();
    let step = frames
        .iter()
        .find(|f| f.get("skill_step").is_some())
        .unwrap();
    eprintln!("chat-UI answer: {text:?}");
    assert_eq!(step["ok"], true, "{step}");
    assert_eq!(step["round"], 1, "{step}");
    assert!(
        step["skill"].is_null() && step["files"].is_array(),
        "{step}"
    );
    assert!(text.contains("6765"), "{text:?}");
    let done = frames.last().unwrap();
    assert_eq!(done["done"], true, "{done}");
    assert!(done["error"].is_null(), "{done}");

    // Ollama's chat, streamed: the same conversation in Ollama's message shape (the prompt
    // renders the same); content lines, then the final frame with `executed_calls`.
    let mut convo = conversation("Use Python to compute the 20th Fibonacci number.");
    let call = convo[2]["tool_calls"][0]["function"].clone();
    let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    convo[2] = json!({"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "run_python", "arguments": args}}]});
    convo[3] = json!({"role": "tool", "content": convo[3]["content"], "tool_name": "run_python"});
    let body = json!({"model": name, "messages": convo, "stream": true,
                      "options": {"temperature": 0, "num_predict": 120}});
    let r = s.request("POST", "/api/chat", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let lines: Vec<Value> = r
        .body
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let text: String = lines
        .iter()
        .filter_map(|l| l["message"]["content"].as_str())
        .collect();
    eprintln!("Ollama answer: {text:?}");
    assert!(text.contains("6765"), "{text:?}");
    let last = lines.last().unwrap();
    assert_eq!(last["done"], true, "{last}");
    let executed = &last["message"]["executed_calls"];
    assert_eq!(executed[0]["name"], "run_python", "{last}");
    assert_eq!(executed[0]["ok"], true, "{last}");
    assert!(
        executed[0]["output"].as_str().unwrap().contains("6765"),
        "{last}"
    );
}
