//! The chat page at `/` end to end: `tests/browser/chat.mjs` drives Debian's headless Chromium
//! (playwright-core) against the real `weft serve` serving Qwen2.5-Coder 0.5B and SmolLM2:
//! streaming, stop, regenerate, edit and resend, a text file and a PDF whose content the
//! answers use, switching models, sessions kept across a reload, a `run_python` call shown (a
//! second server with `--code-exec`), and no console errors.
//! Screenshots (desktop 1280x800 and phone 390x844) go to `<target>/chat-ui-screenshots/`.
//!
//! Needs `node`, `chromium`, `npm ci` in tests/browser and the sandbox runtimes
//! (`scripts/fetch-sandbox.sh`); skips loudly when one is missing, fails under CI.

use std::path::PathBuf;
use std::process::Command;

use weft_core::test_support::model_path;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn chat_page_end_to_end() {
    let (Some(qwen), Some(smol)) = (model_path("qwen2"), model_path("smollm2")) else {
        return;
    };
    if !weft_tests::browser::ready("the chat page browser test", false) {
        return;
    }
    if !weft_sandbox::test_support::runtimes_present("chat_page_end_to_end") {
        return;
    }
    let bin = weft_tests::weft_binary();
    // <target>/debug/weft -> <target>/chat-ui-screenshots
    let shots = bin
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("chat-ui-screenshots");
    let out = Command::new("node")
        .arg(root().join("tests/browser/chat.mjs"))
        .current_dir(root().join("tests/browser"))
        .env("WEFT_BIN", &bin)
        .env("WEFT_MODEL", &qwen)
        .env("WEFT_MODEL2", &smol)
        .env("WEFT_ARTIFACTS", &shots)
        .env("WEFT_SANDBOX_DIR", weft_sandbox::runtimes::default_dir())
        .output()
        .expect("running node tests/browser/chat.mjs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    println!("{stdout}");
    assert!(out.status.success(), "the chat page test failed: {stdout}");
    let summary: serde_json::Value =
        serde_json::from_str(stdout.trim().lines().last().unwrap_or(""))
            .expect("chat.mjs prints a JSON summary");
    assert_eq!(summary["ok"], true);
    let list = summary["screenshots"].as_array().expect("screenshots");
    assert!(list.len() >= 3);
    for s in list {
        let p = PathBuf::from(s.as_str().unwrap());
        assert!(p.is_file(), "{} missing", p.display());
        println!("screenshot: {}", p.display());
    }
}
