//! Qwen2.5-VL and Idefics3 (the tiny random-weight models of tests/data/vision) on `weft
//! serve`, each with its projector found beside it: greedy answers equal `weft run --image`'s
//! (also in decode steps shared with other requests, which is where Qwen's M-RoPE positions
//! must follow each sequence), `/v1/responses` `input_image`, and its bad-input rows
//! (tests/py/vision_families.py, with the official `openai` client).

use std::path::{Path, PathBuf};
use std::process::Command;

use weft_tests::{python, weft_binary, Server};

fn vision_data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data/vision")
        .join(rel)
}

/// `weft run --image`'s greedy answer and prompt length for `image` on `model`.
fn weft_run(model: &Path, mmproj: &Path, image: &Path) -> serde_json::Value {
    let out = Command::new(weft_binary())
        .args(["run", "--model"])
        .arg(model)
        .arg("--mmproj")
        .arg(mmproj)
        .arg("--image")
        .arg(image)
        .args([
            "--prompt",
            "<__media__>\nDescribe this image.",
            "--temperature",
            "0",
            "--max-tokens",
            "8",
            "--ctx",
            "2048",
            "--json",
        ])
        .output()
        .expect("running weft run");
    assert!(
        out.status.success(),
        "weft run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("weft run --json");
    assert!(v["image_tokens"].as_u64().unwrap() > 2, "{v}");
    serde_json::json!({
        "text": v["text"],
        "prompt_tokens": v["prompt_ids"].as_array().unwrap().len(),
    })
}

#[test]
fn qwen25vl_and_idefics3_answer_over_http_as_weft_run_does() {
    let dir = std::env::temp_dir().join(format!("weft-vision-families-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Each projector named after its model, so each is found beside its own.
    let files = [
        ("qwen25vl/qwen25vl-tiny-q8_0.gguf", "qwen25vl-tiny.gguf"),
        (
            "qwen25vl/mmproj-qwen25vl-tiny-f16.gguf",
            "mmproj-qwen25vl-tiny.gguf",
        ),
        ("idefics3/idefics3-tiny-q8_0.gguf", "idefics3-tiny.gguf"),
        (
            "idefics3/mmproj-idefics3-tiny-f16.gguf",
            "mmproj-idefics3-tiny.gguf",
        ),
    ];
    for (from, to) in files {
        std::os::unix::fs::symlink(vision_data(from), dir.join(to)).unwrap();
    }
    let images = vision_data("images");
    let mut expected = serde_json::Map::new();
    for (model, name) in [("qwen25vl-tiny", "qwen25vl"), ("idefics3-tiny", "idefics3")] {
        let text = dir.join(format!("{model}.gguf"));
        let mmproj = dir.join(format!("mmproj-{model}.gguf"));
        let mut per = serde_json::Map::new();
        // Qwen: two aspect ratios (different M-RoPE grids), for the concurrent rows.
        let pics: &[&str] = if name == "qwen25vl" {
            &["tall_300x900.png", "wide_1024x256.jpg"]
        } else {
            &["tiny_37x61.png"]
        };
        for pic in pics {
            per.insert(pic.to_string(), weft_run(&text, &mmproj, &images.join(pic)));
        }
        expected.insert(model.to_string(), per.into());
    }
    let expected_file = dir.join("expected.json");
    std::fs::write(
        &expected_file,
        serde_json::Value::from(expected).to_string(),
    )
    .unwrap();
    let server = Server::start_args(&[
        "--models-dir".to_string(),
        dir.display().to_string(),
        "--ctx".into(),
        "2048".into(),
        "--parallel".into(),
        "3".into(),
    ]);
    let ui = server.request("GET", "/api/tags", None).json();
    assert_eq!(ui["models"].as_array().unwrap().len(), 2, "{ui}");
    if let Some(out) = python(
        "vision_families.py",
        &server.base(),
        &[
            "qwen25vl-tiny",
            "idefics3-tiny",
            &images.display().to_string(),
            &expected_file.display().to_string(),
        ],
        &["openai"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
    assert_eq!(server.request("GET", "/health", None).status, 200);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
