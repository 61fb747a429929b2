//! The embedding routes (`/v1/embeddings`, `/api/embed`, `/api/embeddings`) driven by the
//! official `openai` and `ollama` Python clients (tests/py/embeddings_client.py): an embedding
//! model (the all-MiniLM-L6-v2 folder) served beside a chat model (SmolLM2), vectors against
//! sentence-transformers' reference, bad input as 4xx, chat routes refused for the embedding
//! model, and the chat model embedding too.

use weft_core::test_support::{minilm_dir, model_path, reference_dir};
use weft_tests::{python, Server};

#[test]
fn openai_and_ollama_clients_embed() {
    let (Some(minilm), Some(smol)) = (minilm_dir(), model_path("smollm2")) else {
        return;
    };
    let server = Server::start_args(&[
        "--model".into(),
        format!("smol={}", smol.display()),
        "--model".into(),
        format!("minilm={}", minilm.display()),
        "--ctx".into(),
        "512".into(),
    ]);
    let reference = reference_dir().join("all-MiniLM-L6-v2.embeddings.json");
    if let Some(out) = python(
        "embeddings_client.py",
        &server.base(),
        &["minilm", "smol", reference.to_str().unwrap()],
        &["openai", "ollama", "requests"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
    // Still serving, both models listed.
    assert_eq!(server.request("GET", "/health", None).status, 200);
    let tags = server.request("GET", "/api/tags", None).json();
    let names: Vec<&str> = tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("minilm")), "{names:?}");
    // What each model can do: the encoder only embeds; SmolLM2's template offers no tools.
    let caps = |model: &str| {
        let body = format!(r#"{{"model": "{model}"}}"#);
        server.request("POST", "/api/show", Some(&body)).json()["capabilities"].clone()
    };
    assert_eq!(caps("minilm"), serde_json::json!(["embedding"]));
    assert_eq!(caps("smol"), serde_json::json!(["completion"]));
}
