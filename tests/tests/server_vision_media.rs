//! Uploaded images and videos and OpenAI `video_url` parts on `weft serve` with Gemma 3 270M
//! and the tiny Gemma 3 projector (tests/data/vision/gemma3), through `requests` (the chat-UI
//! protocol) and the official `openai` client (tests/py/vision_media_client.py).

use std::path::PathBuf;

use weft_core::test_support::model_path;
use weft_tests::{python, Server};

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join(rel)
}

#[test]
fn uploaded_images_videos_and_video_parts() {
    let (Some(gemma), Some(smol)) = (model_path("gemma3"), model_path("smollm2")) else {
        return;
    };
    let gemma_arg = format!("gemma={}", gemma.display());
    let smol_arg = format!("smol={}", smol.display());
    let mmproj = data("vision/gemma3/mmproj-gemma3-tiny-f16.gguf")
        .display()
        .to_string();
    let server = Server::start_args(
        &[
            "--model",
            &gemma_arg,
            "--mmproj",
            &mmproj,
            "--model",
            &smol_arg,
            "--ctx",
            "2048",
            "--parallel",
            "1",
        ]
        .map(String::from),
    );
    let images = data("vision/images").display().to_string();
    let media = data("media").display().to_string();
    if let Some(out) = python(
        "vision_media_client.py",
        &server.base(),
        &["gemma", "smol", &images, &media],
        &["openai", "requests"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
    assert_eq!(server.request("GET", "/health", None).status, 200);
}
