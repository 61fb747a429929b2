//! `weft synth`: a synthetic model at SmolLM2's width (2 layers, a small vocabulary, to stay
//! quick) loads, decodes with finite logits, decodes the same twice, and the same arguments
//! write the same bytes. Bad arguments fail with one line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn weft(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn synth(path: &Path, extra: &[&str]) {
    let p = path.to_str().unwrap();
    let mut args = vec![
        "synth", "--size", "smollm2", "--layers", "2", "--vocab", "2048",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-o", p]);
    ok(&weft(&args));
}

/// 8 greedy steps with the 3 best logits of each: (token ids, logits).
fn greedy(path: &Path) -> (Vec<u64>, Vec<f64>) {
    let out = weft(&[
        "run",
        "--model",
        path.to_str().unwrap(),
        "--threads",
        "2",
        "--json",
        "--raw",
        "--logits",
        "3",
        "--prompt",
        "The history of the printing press",
        "--max-tokens",
        "8",
        "--ignore-eos",
        "--temperature",
        "0",
    ]);
    ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let j: serde_json::Value = serde_json::from_str(text.trim().lines().last().unwrap()).unwrap();
    let tokens: Vec<u64> = j["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect();
    let mut logits = Vec::new();
    for step in j["steps"].as_array().unwrap() {
        for pair in step["top"].as_array().unwrap() {
            // A NaN or infinity would serialise as null.
            logits.push(pair[1].as_f64().expect("a finite logit"));
        }
    }
    (tokens, logits)
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("weft-synth-{}-{name}.gguf", std::process::id()))
}

#[test]
fn synthetic_models_load_decode_and_repeat() {
    let (a, b) = (temp("a"), temp("b"));
    synth(&a, &["--seed", "7"]);
    synth(&b, &["--seed", "7"]);
    assert!(
        std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
        "the same seed wrote different bytes"
    );

    let (t1, l1) = greedy(&a);
    assert_eq!(t1.len(), 8);
    assert_eq!(l1.len(), 8 * 3);
    assert!(l1.iter().all(|v| v.is_finite()), "{l1:?}");
    let (t2, _) = greedy(&a);
    assert_eq!(t1, t2, "greedy decode differs between two runs");

    let out = weft(&[
        "bench",
        "--model",
        a.to_str().unwrap(),
        "-p",
        "8",
        "-n",
        "4",
        "-r",
        "1",
        "--threads",
        "2",
        "--json",
    ]);
    ok(&out);

    // Qwen2 with biases and a K-quant that falls back to Q5_0 on 576-wide rows.
    synth(&b, &["--arch", "qwen2", "--type", "q4_k", "--seed", "1"]);
    let (t3, l3) = greedy(&b);
    assert_eq!(t3.len(), 8);
    assert!(l3.iter().all(|v| v.is_finite()), "{l3:?}");
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
}

#[test]
fn bad_arguments_fail_with_one_line() {
    let out = weft(&["synth", "--size", "huge", "-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
    let out = weft(&["synth", "--size", "smollm2", "--type", "q3_z", "-o", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let out = weft(&["synth", "--size", "smollm2", "--layers", "0", "-o", "x"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let out = weft(&[
        "synth",
        "--size",
        "smollm2",
        "--layers",
        "1",
        "--vocab",
        "300",
        "-o",
        "/nonexistent-dir/x.gguf",
    ]);
    assert_eq!(out.status.code(), Some(1));
}
