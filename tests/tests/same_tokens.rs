//! One way to run a model: `weft run` (core's single-sequence `Session`) and `weft serve` (the
//! continuous-batching scheduler) run the same per-sequence logic, so the same greedy chat
//! stops on the same tokens: once at the end-of-generation token, once at a stop string. The
//! browser build is held to the same cases in `tests/browser/run.mjs` (`CASES` there).

use std::process::Command;

use serde_json::{json, Value};
use weft_core::gguf::ModelFile;
use weft_core::test_support::model_path;
use weft_core::tokenizer::Tokenizer;
use weft_tests::{weft_binary, Server};

/// The question, and the stop string of the second case: two words of the greedy answer
/// ("The answer to this classic math problem is 4."), so the stop spans two tokens.
const QUESTION: &str = "What is 2+2?";
const STOP: &str = "problem is";
const MAX: usize = 24;

/// `weft run --json` for the question, greedy, with `extra` flags.
fn cli(model: &std::path::Path, extra: &[&str]) -> Value {
    let out = Command::new(weft_binary())
        .args(["run", "--model"])
        .arg(model)
        .args(["--prompt", QUESTION, "--temperature", "0", "--threads", "2"])
        .args(["--max-tokens", &MAX.to_string(), "--json"])
        .args(extra)
        .output()
        .expect("running weft run");
    assert!(
        out.status.success(),
        "weft run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("weft run --json prints JSON")
}

/// The same question as a greedy OpenAI chat request; returns (text, finish, bytes per token).
fn served(server: &Server, stop: Option<&str>) -> (String, String, Vec<Vec<u8>>) {
    let mut body = json!({
        "model": "smol",
        "messages": [{"role": "user", "content": QUESTION}],
        "temperature": 0,
        "max_tokens": MAX,
        "logprobs": true,
    });
    if let Some(s) = stop {
        body["stop"] = json!([s]);
    }
    let r = server.request("POST", "/v1/chat/completions", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let choice = &v["choices"][0];
    let bytes: Vec<Vec<u8>> = choice["logprobs"]["content"]
        .as_array()
        .expect("logprobs.content")
        .iter()
        .map(|t| {
            t["bytes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_u64().unwrap() as u8)
                .collect()
        })
        .collect();
    assert_eq!(
        v["usage"]["completion_tokens"].as_u64(),
        Some(bytes.len() as u64)
    );
    (
        choice["message"]["content"].as_str().unwrap().to_string(),
        choice["finish_reason"].as_str().unwrap().to_string(),
        bytes,
    )
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn cli_and_server_stop_on_the_same_tokens() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let file = ModelFile::open(&model).unwrap();
    let tok = Tokenizer::from_gguf(&file.gguf).unwrap();
    let server = Server::start(&model, &["--alias", "smol"]);

    // 1. The answer ends with the end-of-generation token.
    let eog = cli(&model, &[]);
    let eog_tokens = ids(&eog["tokens"]);
    assert_eq!(eog["finish_reason"], "stop", "{eog}");
    assert!(eog_tokens.len() < MAX, "{eog}");
    assert!(eog["text"].as_str().unwrap().contains(STOP), "{eog}");
    let (text, finish, bytes) = served(&server, None);
    assert_eq!(text, eog["text"].as_str().unwrap());
    assert_eq!(finish, "stop");
    let cli_bytes: Vec<Vec<u8>> = eog_tokens
        .iter()
        .map(|&t| tok.token_bytes(t, true))
        .collect();
    assert_eq!(bytes, cli_bytes, "server vs CLI tokens");

    // 2. The same answer cut at a stop string: the token that completes it is generated, the
    //    text ends before it.
    let cut = cli(&model, &["--stop", STOP]);
    let cut_tokens = ids(&cut["tokens"]);
    assert_eq!(cut["finish_reason"], "stop", "{cut}");
    assert!(cut_tokens.len() < eog_tokens.len(), "{cut}");
    assert_eq!(cut_tokens[..], eog_tokens[..cut_tokens.len()]);
    let full = eog["text"].as_str().unwrap();
    assert_eq!(
        cut["text"].as_str().unwrap(),
        &full[..full.find(STOP).unwrap()]
    );
    let (text, finish, bytes) = served(&server, Some(STOP));
    assert_eq!(text, cut["text"].as_str().unwrap());
    assert_eq!(finish, "stop");
    assert_eq!(bytes, cli_bytes[..cut_tokens.len()], "server vs CLI tokens");
    println!(
        "{}",
        json!({"eog_tokens": eog_tokens, "stop_tokens": cut_tokens, "text": full})
    );
}
