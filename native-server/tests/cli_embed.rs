//! `weft embed` and `weft info` on the all-MiniLM-L6-v2 folder, run as processes: vectors
//! against sentence-transformers' reference, the options, and one-line errors.

use std::process::Command;

use weft_core::embed::cosine;
use weft_core::test_support::{embedding_reference, floats, minilm_dir, EMBED_MIN_COSINE};

fn weft(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .output()
        .expect("run weft")
}

fn one_line_error(out: &std::process::Output) -> String {
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.starts_with("weft: error: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err
}

#[test]
fn embed_prints_reference_vectors() {
    let Some(dir) = minilm_dir() else { return };
    let dir = dir.to_str().unwrap();
    let r = embedding_reference();
    let s = &r["sentences"];
    let (a, b) = (
        s[6]["text"].as_str().unwrap(),
        s[21]["text"].as_str().unwrap(),
    );
    let out = weft(&["embed", "--model", dir, "--threads", "2", "--json", a, b]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["model"], "all-MiniLM-L6-v2");
    assert_eq!(v["dim"], 384);
    let embs = v["embeddings"].as_array().unwrap();
    assert_eq!(embs.len(), 2);
    for (e, want) in embs.iter().zip([&s[6], &s[21]]) {
        assert!(cosine(&floats(e), &floats(&want["embedding"])) >= EMBED_MIN_COSINE);
    }
    // Plain output: one line of 384 numbers per text; --no-normalize gives the pooled vector.
    let out = weft(&[
        "embed",
        "--model",
        dir,
        "--no-normalize",
        "--threads",
        "2",
        a,
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let line: Vec<f32> = text.trim().split(' ').map(|x| x.parse().unwrap()).collect();
    assert_eq!(line.len(), 384);
    assert!(cosine(&line, &floats(&s[6]["pooled"])) >= EMBED_MIN_COSINE);
    let out = weft(&["embed", "--model", dir, "--dimensions", "64", "--json", a]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["dim"], 64);
}

#[test]
fn embed_errors_are_one_line() {
    let Some(dir) = minilm_dir() else { return };
    let dir = dir.to_str().unwrap();
    let e = one_line_error(&weft(&["embed", "--model", dir]));
    assert!(e.contains("no input"), "{e}");
    let long = "word ".repeat(300);
    let e = one_line_error(&weft(&["embed", "--model", dir, "--no-truncate", &long]));
    assert!(e.contains("302 tokens") && e.contains("256"), "{e}");
    let e = one_line_error(&weft(&[
        "embed",
        "--model",
        dir,
        "--dimensions",
        "999",
        "x",
    ]));
    assert!(e.contains("dimensions"), "{e}");
    let e = one_line_error(&weft(&["embed", "--model", "/nonexistent/model.gguf", "x"]));
    assert!(e.contains("/nonexistent/model.gguf"), "{e}");
    let e = one_line_error(&weft(&["embed", "--model", "/tmp", "x"]));
    assert!(e.contains("config.json"), "{e}");
}

#[test]
fn info_describes_a_model_folder() {
    let Some(dir) = minilm_dir() else { return };
    let out = weft(&["info", "--json", dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["format"], "huggingface");
    assert_eq!(v["architecture"], "bert");
    assert_eq!(v["hparams"]["embedding_length"], 384);
    assert_eq!(v["hparams"]["block_count"], 6);
    assert_eq!(v["embedding"]["pooling"], "mean");
    assert_eq!(v["embedding"]["normalize"], true);
    assert_eq!(v["embedding"]["max_tokens"], 256);
    assert_eq!(v["tokenizer"]["vocab_size"], 30522);
    let names: Vec<&str> = v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"token_embd.weight") && names.contains(&"blk.5.layer_output_norm.bias")
    );
    let text = weft(&["info", dir.to_str().unwrap()]);
    assert!(text.status.success());
    assert!(String::from_utf8_lossy(&text.stdout).contains("Hugging Face folder"));
}
