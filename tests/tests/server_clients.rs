//! `weft serve` driven by the official `openai` and `ollama` Python clients (tests/py/*.py):
//! models, chat and completions (streaming and not), logprobs, stop strings, seeds, usage,
//! prefix reuse (cached tokens), tokenize round trip, error statuses.

use weft_core::test_support::model_path;
use weft_tests::{python, Server};

#[test]
fn openai_and_ollama_clients_work_unchanged() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let server = Server::start(
        &model,
        &["--ctx", "512", "--parallel", "2", "--alias", "smol"],
    );
    if let Some(out) = python(
        "openai_client.py",
        &server.base(),
        &["smol"],
        &["openai", "requests"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
    if let Some(out) = python(
        "ollama_client.py",
        &server.base(),
        &["smol"],
        &["ollama", "requests"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
    // Still serving.
    assert_eq!(server.request("GET", "/health", None).status, 200);
}
