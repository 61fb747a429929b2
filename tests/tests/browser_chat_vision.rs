//! Images in the chat page at `/`: `tests/browser/chat_vision.mjs` drives Debian's headless
//! Chromium (playwright-core) against the real `weft serve` serving Gemma 3 270M with the tiny
//! Gemma 3 projector (tests/data/vision/gemma3) and SmolLM2 (text only): a PNG attached,
//! shown as a thumbnail, answered, and shown in the conversation (and after a reload); an MP4's
//! frames sent with `isVideo`; a scanned PDF attached as its rendered pages; the text-only model's notice; no console errors.
//! Screenshots go to `<target>/chat-ui-screenshots/`.
//!
//! Needs `node`, `chromium` and `npm ci` in tests/browser; skips loudly when one is missing,
//! fails under CI.

use std::path::PathBuf;
use std::process::Command;

use weft_core::test_support::model_path;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn chat_page_attaches_images_for_a_vision_model() {
    let (Some(gemma), Some(smol)) = (model_path("gemma3"), model_path("smollm2")) else {
        return;
    };
    if !weft_tests::browser::ready("the chat page vision test", false) {
        return;
    }
    let data = root().join("tests/data");
    let bin = weft_tests::weft_binary();
    let shots = bin
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("chat-ui-screenshots");
    let out = Command::new("node")
        .arg(root().join("tests/browser/chat_vision.mjs"))
        .current_dir(root().join("tests/browser"))
        .env("WEFT_BIN", &bin)
        .env("WEFT_VISION_MODEL", &gemma)
        .env(
            "WEFT_MMPROJ",
            data.join("vision/gemma3/mmproj-gemma3-tiny-f16.gguf"),
        )
        .env("WEFT_MODEL2", &smol)
        .env("WEFT_IMAGE", data.join("vision/images/square_224x224.png"))
        .env("WEFT_VIDEO", data.join("media/h264_baseline.mp4"))
        .env("WEFT_SCAN", data.join("media/scan3.pdf"))
        .env("WEFT_ARTIFACTS", &shots)
        .output()
        .expect("running node tests/browser/chat_vision.mjs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    println!("{stdout}");
    assert!(
        out.status.success(),
        "the chat page vision test failed: {stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(stdout.trim().lines().last().unwrap_or(""))
            .expect("chat_vision.mjs prints a JSON summary");
    assert_eq!(summary["ok"], true);
    for s in summary["screenshots"].as_array().expect("screenshots") {
        let p = PathBuf::from(s.as_str().unwrap());
        assert!(p.is_file(), "{} missing", p.display());
        println!("screenshot: {}", p.display());
    }
}
