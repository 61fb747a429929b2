//! Ollama's `/api/create` from a Hugging Face folder uploaded as blobs, with the official
//! `ollama` Python client (`tests/py/create_client.py`): `create_blob` for every file, `create`
//! with `files`, the streamed status lines, the model listed and chatting; an unknown digest
//! and a body that does not match its digest are 400s that leave nothing behind. The folder is
//! made from the shipped SmolLM2 by `tests/py/gguf_to_hf.py` (see store_convert.rs).

use std::path::PathBuf;

use weft_core::test_support::model_path;
use weft_tests::{python, Server};

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-create-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn ollama_client_creates_a_model_from_safetensors_blobs() {
    let Some(orig) = model_path("smollm2") else {
        return;
    };
    let dir = scratch("blobs");
    let hf = dir.join("hf");
    let digests = dir.join("digests.json");
    let made = python(
        "gguf_to_hf.py",
        "_",
        &[
            orig.to_str().unwrap(),
            hf.to_str().unwrap(),
            "--shards",
            "1",
            "--dump",
            digests.to_str().unwrap(),
        ],
        &["gguf", "safetensors", "numpy", "ollama", "httpx"],
    );
    if made.is_none() {
        return;
    }
    let store = dir.join("store");
    std::fs::create_dir_all(&store).unwrap();
    std::os::unix::fs::symlink(&orig, store.join("base.gguf")).unwrap();
    let s = Server::start_args(&[
        "--models-dir".into(),
        store.display().to_string(),
        "--ctx".into(),
        "256".into(),
        "--parallel".into(),
        "1".into(),
    ]);
    let out = python(
        "create_client.py",
        &s.base(),
        &[hf.to_str().unwrap(), "made"],
        &["ollama", "httpx"],
    )
    .expect("the client's packages were checked above");
    assert!(out.contains("ok the created model answers"), "{out}");
    // The job's scratch folder went; only the uploaded files stayed, as blobs.
    let partial: Vec<_> = std::fs::read_dir(store.join(".weft-partial"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(partial.is_empty(), "left in .weft-partial: {partial:?}");
    let blobs = std::fs::read_dir(store.join(".weft-blobs"))
        .unwrap()
        .count();
    let files = std::fs::read_dir(&hf).unwrap().count();
    assert_eq!(
        blobs, files,
        "one blob per uploaded file, none for the bad uploads"
    );
    let jobs = s.request("GET", "/api/v1/jobs", None).json();
    assert!(
        jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["kind"] == "convert" && j["request"]["name"] == "made"),
        "{jobs}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
