//! Image input on `weft serve` with Gemma 3 270M and the tiny Gemma 3 projector
//! (tests/data/vision/gemma3): the `openai` client with `image_url`, the `ollama` client with
//! `images` (chat and generate), cache reuse for the same image, a bad-input table
//! (tests/py/vision_client.py); and a projector found beside a model in a models directory.

use std::path::PathBuf;

use weft_core::test_support::model_path;
use weft_tests::{python, Server};

fn vision_data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data/vision")
        .join(rel)
}

fn projector() -> PathBuf {
    vision_data("gemma3/mmproj-gemma3-tiny-f16.gguf")
}

#[test]
fn clients_send_images_and_bad_images_are_refused() {
    let (Some(gemma), Some(smol)) = (model_path("gemma3"), model_path("smollm2")) else {
        return;
    };
    let gemma_arg = format!("gemma={}", gemma.display());
    let smol_arg = format!("smol={}", smol.display());
    let mmproj = projector().display().to_string();
    let server = Server::start_args(
        &[
            "--model",
            &gemma_arg,
            "--mmproj",
            &mmproj,
            "--model",
            &smol_arg,
            "--ctx",
            "1024",
            "--parallel",
            "1",
            "--max-images",
            "4",
            "--max-image-bytes",
            "1MiB",
        ]
        .map(String::from),
    );
    let images = vision_data("images").display().to_string();
    if let Some(out) = python(
        "vision_client.py",
        &server.base(),
        &["gemma", "smol", &images],
        &["openai", "ollama", "requests"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
    assert_eq!(server.request("GET", "/health", None).status, 200);
}

#[test]
fn a_projector_beside_the_model_is_found_and_not_served_alone() {
    let Some(gemma) = model_path("gemma3") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("weft-vision-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&gemma, dir.join("gemma-3-270m-q4_k_m.gguf")).unwrap();
    std::os::unix::fs::symlink(projector(), dir.join("mmproj-gemma3-tiny-f16.gguf")).unwrap();
    let server = Server::start_args(&[
        "--models-dir".to_string(),
        dir.display().to_string(),
        "--ctx".into(),
        "512".into(),
    ]);
    let tags = server.request("GET", "/api/tags", None).json();
    let names: Vec<&str> = tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["gemma-3-270m-q4_k_m:latest"], "{tags}");
    let show = server
        .request(
            "POST",
            "/api/show",
            Some(r#"{"model": "gemma-3-270m-q4_k_m"}"#),
        )
        .json();
    let caps = show["capabilities"].as_array().unwrap();
    assert!(caps.iter().any(|c| c == "vision"), "{show}");
    let ui = server.request("GET", "/api/models", None).json();
    assert_eq!(ui["projector"], "mmproj-gemma3-tiny-f16.gguf", "{ui}");
    // An image through the found projector.
    let png = std::fs::read(vision_data("images/tiny_37x61.png")).unwrap();
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(png);
    let body = serde_json::json!({
        "model": "gemma-3-270m-q4_k_m", "stream": false,
        "prompt": "What is in this picture?", "images": [b64],
        "options": {"num_predict": 2, "temperature": 0}
    });
    let r = server.request("POST", "/api/generate", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert!(r.json()["prompt_eval_count"].as_u64().unwrap() > 258);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
