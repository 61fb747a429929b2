//! `weft convert` on Hugging Face decoder folders. No small decoder in safetensors ships in a
//! package this project can use, so the folders are made at test time from the GGUF models the
//! repository ships (tests/py/gguf_to_hf.py: dequantized to F32 safetensors, llama.cpp's
//! conversion undone, config and tokenizer files from the GGUF's metadata). Converting back
//! must give the same tensors (exactly, in F32), the same metadata that matters
//! (tests/py/compare_converted.py), and the same greedy tokens from `weft run` as the original
//! model dequantized to F32.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use weft_core::test_support::model_path;
use weft_tests::{python, weft_binary, Server};

const PY_NEEDS: &[&str] = &["gguf", "safetensors", "numpy"];

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-convert-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn weft(args: &[&str]) -> std::process::Output {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    Command::new(BIN.get_or_init(weft_binary))
        .args(args)
        .output()
        .expect("running weft")
}

fn weft_ok(args: &[&str]) -> String {
    let out = weft(args);
    assert!(
        out.status.success(),
        "weft {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Greedy tokens of `weft run` on `model` for a few prompts.
fn greedy(model: &Path) -> Vec<Value> {
    ["The capital of France is", "def fibonacci(n):"]
        .iter()
        .map(|p| {
            let out = weft_ok(&[
                "run",
                "--model",
                model.to_str().unwrap(),
                "--prompt",
                p,
                "--raw",
                "--max-tokens",
                "12",
                "--temperature",
                "0",
                "--ignore-eos",
                "--json",
                "--threads",
                "2",
            ]);
            let v: Value = serde_json::from_str(out.trim()).expect("weft run --json");
            v["tokens"].clone()
        })
        .collect()
}

/// Makes the HF folder of model `key`, converts it to F32 and checks the result; returns the
/// scratch folder, the HF folder and the converted file.
fn round_trip(
    key: &str,
    shards: usize,
    close: Option<&str>,
) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let orig = model_path(key)?;
    let dir = scratch(key);
    let hf = dir.join("hf");
    let digests = dir.join("digests.json");
    let shards = shards.to_string();
    python(
        "gguf_to_hf.py",
        "_",
        &[
            orig.to_str().unwrap(),
            hf.to_str().unwrap(),
            "--shards",
            &shards,
            "--dump",
            digests.to_str().unwrap(),
        ],
        PY_NEEDS,
    )?;
    let conv = dir.join("converted.gguf");
    let said = weft_ok(&[
        "convert",
        hf.to_str().unwrap(),
        "-o",
        conv.to_str().unwrap(),
        "--type",
        "f32",
    ]);
    assert!(said.contains("converted"), "{said}");
    let mut args = vec![
        conv.to_str().unwrap(),
        orig.to_str().unwrap(),
        digests.to_str().unwrap(),
    ];
    if let Some(c) = close {
        args.extend(["--close", c]);
    }
    let report = python("compare_converted.py", "_", &args, PY_NEEDS)?;
    assert!(report.contains(", 0 differences"), "{report}");
    // Nothing but the result is left beside it (no scratch or partial file).
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial") || n.contains("scratch"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    // The same greedy tokens as the shipped model dequantized to F32 by `weft quantize`.
    let orig_f32 = dir.join("original-f32.gguf");
    weft_ok(&[
        "quantize",
        orig.to_str().unwrap(),
        orig_f32.to_str().unwrap(),
        "f32",
        "--allow-requantize",
        "--threads",
        "2",
    ]);
    let (a, b) = (greedy(&orig_f32), greedy(&conv));
    assert_eq!(
        a, b,
        "greedy tokens differ between the original and the conversion"
    );
    assert!(a
        .iter()
        .all(|t| t.as_array().is_some_and(|t| t.len() == 12)));
    std::fs::remove_file(&orig_f32).unwrap();
    Some((dir, hf, conv))
}

#[test]
fn llama_smollm2_sharded_round_trip_and_quantized_output() {
    let Some((dir, hf, conv)) = round_trip("smollm2", 2, None) else {
        return;
    };
    assert!(hf.join("model.safetensors.index.json").is_file());
    // Straight to a quantized type: the same bytes as quantizing the F32 conversion.
    let direct = dir.join("direct-q4_k_m.gguf");
    let two_step = dir.join("two-step-q4_k_m.gguf");
    weft_ok(&[
        "convert",
        hf.to_str().unwrap(),
        "-o",
        direct.to_str().unwrap(),
        "--type",
        "Q4_K_M",
        "--threads",
        "2",
    ]);
    weft_ok(&[
        "quantize",
        conv.to_str().unwrap(),
        two_step.to_str().unwrap(),
        "q4_k_m",
        "--threads",
        "2",
    ]);
    assert!(
        std::fs::read(&direct).unwrap() == std::fs::read(&two_step).unwrap(),
        "convert --type Q4_K_M differs from convert + quantize"
    );
    // Into the store by name (default F16), listed there.
    let store = dir.join("store");
    let said = weft_ok(&[
        "convert",
        hf.to_str().unwrap(),
        "-o",
        "smol-conv",
        "--models-dir",
        store.to_str().unwrap(),
    ]);
    assert!(said.contains("F16"), "{said}");
    let list = weft_ok(&["list", "--models-dir", store.to_str().unwrap()]);
    assert!(list.contains("smol-conv"), "{list}");
    through_the_server(&dir, &hf);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Polls a job until it ends.
fn wait_job(s: &Server, id: &str) -> Value {
    let t0 = Instant::now();
    loop {
        let r = s.request("GET", &format!("/api/v1/models/jobs/{id}"), None);
        assert_eq!(r.status, 200, "{}", r.body);
        let j = r.json();
        if ["succeeded", "failed", "cancelled"].contains(&j["status"].as_str().unwrap()) {
            return j;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(600),
            "job {id} did not end: {j}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `POST /api/v1/models/convert` and the import of a folder, as jobs of a running server;
/// 400s for requests wrong on their face.
fn through_the_server(dir: &Path, hf: &Path) {
    let store = dir.join("served");
    std::fs::create_dir_all(&store).unwrap();
    // The server needs a model to start with; the shipped one, linked in.
    let base = model_path("smollm2").unwrap();
    std::os::unix::fs::symlink(&base, store.join("base.gguf")).unwrap();
    let s = Server::start_args(&[
        "--models-dir".into(),
        store.display().to_string(),
        "--import-root".into(),
        dir.display().to_string(),
        "--ctx".into(),
        "256".into(),
    ]);
    let post = |path: &str, body: Value| s.request("POST", path, Some(&body.to_string()));
    let r = post(
        "/api/v1/models/convert",
        json!({"path": hf, "name": "smol-hf", "type": "q8_0"}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let job = wait_job(&s, r.json()["job_id"].as_str().unwrap());
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(job["kind"], "convert", "{job}");
    assert_eq!(job["result"]["type"], "Q8_0", "{job}");
    let r = post(
        "/api/v1/models/import",
        json!({"path": hf, "name": "smol-imported"}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let job = wait_job(&s, r.json()["job_id"].as_str().unwrap());
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(job["result"]["how"], "converted", "{job}");
    let tags = s.request("GET", "/api/tags", None).body;
    assert!(
        tags.contains("smol-hf") && tags.contains("smol-imported"),
        "{tags}"
    );
    // The converted model answers.
    let r = post(
        "/api/generate",
        json!({"model": "smol-hf", "prompt": "The capital of France is", "stream": false,
               "options": {"temperature": 0, "num_predict": 4}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // Wrong on their face: 400 and no job.
    let r = post(
        "/api/v1/models/convert",
        json!({"path": "/etc", "name": "x"}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("import roots"), "{}", r.body);
    let r = post(
        "/api/v1/models/convert",
        json!({"path": hf, "type": "q3_x"}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let other = dir.join("neox");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("config.json"), r#"{"model_type": "gpt_neox"}"#).unwrap();
    let r = post("/api/v1/models/convert", json!({"path": other}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("cannot be converted"), "{}", r.body);
}

#[test]
fn qwen2_round_trip() {
    if let Some((dir, _, _)) = round_trip("qwen2", 1, None) {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn gemma3_round_trip() {
    // Gemma's norms go through `w - 1` and back, which F32 cannot always undo exactly.
    if let Some((dir, _, _)) = round_trip("gemma3", 1, Some("norm.weight")) {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn bad_folders_fail_with_a_clear_message() {
    let dir = scratch("bad");
    let hf = dir.join("hf");
    std::fs::create_dir_all(&hf).unwrap();
    let out_path = dir.join("out.gguf");
    let out = out_path.to_str().unwrap();
    let fails = |what: &str, want: &str| {
        let o = weft(&["convert", hf.to_str().unwrap(), "-o", out]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{what}: succeeded");
        assert!(err.contains(want), "{what}: {err}");
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(names.len(), 1, "{what}: files left behind");
    };
    fails("no config", "config.json");
    std::fs::write(
        hf.join("config.json"),
        r#"{"model_type": "gpt_neox", "hidden_size": 8, "intermediate_size": 8,
            "num_hidden_layers": 1, "num_attention_heads": 2}"#,
    )
    .unwrap();
    fails("unsupported family", "cannot be converted");
    std::fs::write(
        hf.join("config.json"),
        r#"{"model_type": "llama", "hidden_size": 8, "intermediate_size": 8,
            "num_hidden_layers": 1, "num_attention_heads": 2}"#,
    )
    .unwrap();
    fails("no tokenizer", "tokenizer.json");
    std::fs::write(
        hf.join("tokenizer.json"),
        r#"{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
            "pre_tokenizer": {"type": "ByteLevel"}}"#,
    )
    .unwrap();
    fails("no weights", "safetensors");
    std::fs::write(
        hf.join("model.safetensors"),
        b"\x10\x00\x00\x00\x00\x00\x00\x00{",
    )
    .unwrap();
    fails("bad weights", "safetensors");
    let o = weft(&["convert", hf.to_str().unwrap(), "-o", out, "--type", "q3_x"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("q3_x"));
    let _ = std::fs::remove_dir_all(&dir);
}
