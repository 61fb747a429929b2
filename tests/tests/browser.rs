//! The browser build end to end: `tests/browser/run.mjs` drives Debian's headless Chromium
//! (playwright-core) against the real `weft serve`: WebGPU tokens equal the native CPU
//! backend's and the llama.cpp reference (with subgroups where Chromium offers them, and the
//! same tokens with them turned off), the second load comes from the browser cache, the
//! example page works, and without WebGPU the CPU fallback gives the same tokens; `weft.embed`
//! on all-MiniLM-L6-v2 matches sentence-transformers on both; the model requantized to
//! Q4_K_M, Q5_K_M and Q6_K (`weft quantize --pure`, in a temp dir) gives the native CPU
//! backend's greedy tokens on WebGPU.
//!
//! Needs `chromium`, `npm ci` in tests/browser and `scripts/build-web.sh` (CI installs and
//! runs all three); skips loudly when one is missing, fails under CI.

use std::path::PathBuf;
use std::process::Command;

use weft_core::test_support::{minilm_dir, model_path, reference_dir};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn browser_end_to_end() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    if !weft_tests::browser::ready("the browser test", true) {
        return;
    }
    let bin = weft_tests::weft_binary();
    // all-MiniLM-L6-v2 as GGUF (the browser loads GGUF files), written from the folder.
    let embed = minilm_dir().map(|dir| {
        let hf = weft_core::hf::HfModel::open(&dir).expect("the MiniLM folder opens");
        let path = std::env::temp_dir().join(format!("weft-minilm-{}.gguf", std::process::id()));
        std::fs::write(&path, hf.to_gguf()).expect("writing the MiniLM GGUF");
        path
    });
    let mut cmd = Command::new("node");
    if let Some(p) = &embed {
        cmd.env("WEFT_EMBED_GGUF", p).env(
            "WEFT_EMBED_REFERENCE",
            reference_dir().join("all-MiniLM-L6-v2.embeddings.json"),
        );
    }
    let out = cmd
        .arg(root().join("tests/browser/run.mjs"))
        .env("WEFT_BIN", &bin)
        .env("WEFT_MODEL", &model)
        .env("WEFT_REFERENCE_DIR", reference_dir())
        .output()
        .expect("running node tests/browser/run.mjs");
    if let Some(p) = &embed {
        let _ = std::fs::remove_file(p);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    println!("{stdout}");
    assert!(out.status.success(), "the browser test failed: {stdout}");
    let figures: serde_json::Value =
        serde_json::from_str(stdout.trim().lines().last().unwrap_or(""))
            .expect("run.mjs prints a JSON summary");
    assert_eq!(figures["ok"], true);
}
