//! `weft tokenize` run as a process, checked against llama.cpp's reference ids.

use std::process::Command;

use weft_core::test_support::{model_path, reference};

fn weft(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .output()
        .expect("run weft")
}

#[test]
fn tokenize_prints_reference_ids() {
    let (Some(model), Some(r)) = (model_path("qwen2"), reference("qwen2")) else {
        return;
    };
    let model = model.to_str().unwrap();
    let case = &r["tokenize"][0];
    let text = case["text"].as_str().unwrap();
    let want: Vec<String> = case["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.to_string())
        .collect();
    let out = weft(&["tokenize", "--model", model, text]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), want.join(" "));

    // Chat prompt: special tokens parsed, JSON output with pieces.
    let prompt = r["cases"][0]["prompt"].as_str().unwrap();
    let out = weft(&["tokenize", "--model", model, "--special", "--json", prompt]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json output");
    assert_eq!(v["ids"], r["cases"][0]["prompt_ids"]);
    let pieces: String = v["pieces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(pieces, prompt);
}

#[test]
fn tokenize_bos_follows_the_model() {
    let Some(model) = model_path("gemma3") else { return };
    let model = model.to_str().unwrap();
    let out = weft(&["tokenize", "--model", model, "--bos", "Hello, world!"]);
    let ids = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(ids.starts_with("2 "), "{ids}");
    let out = weft(&["tokenize", "--model", model, "Hello, world!"]);
    assert!(!String::from_utf8_lossy(&out.stdout).starts_with("2 "));
}

#[test]
fn tokenize_reports_bad_model() {
    let out = weft(&["tokenize", "--model", "/nonexistent.gguf", "x"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nonexistent.gguf"), "{err}");
}
