//! Tool calling and structured output through the official `openai` and `ollama` Python
//! clients (tests/py/tools_client.py), on Qwen 2.5 (its chat template renders `tools` and the
//! model answers with `<tool_call>` blocks). Greedy throughout, so the checks are exact.

use weft_core::test_support::model_path;
use weft_tests::{python, Server};

#[test]
fn tools_and_structured_output_with_real_clients() {
    let Some(model) = model_path("qwen2") else {
        return;
    };
    let server = Server::start(
        &model,
        &["--ctx", "1024", "--parallel", "2", "--alias", "qwen"],
    );
    if let Some(out) = python(
        "tools_client.py",
        &server.base(),
        &["qwen"],
        &["openai", "ollama"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
    assert_eq!(server.request("GET", "/health", None).status, 200);
}
