//! Locating the reference models and llama.cpp reference data from tests.
//!
//! Models live in `models/` at the workspace root (fetched by `scripts/fetch-models.sh`), or in
//! `$WEFT_MODELS_DIR`. Reference data lives in `../shared/reference/` beside the checkout, or in
//! `$WEFT_REFERENCE_DIR`. When a model is missing, tests skip loudly — except under CI
//! (`CI` set), where a missing model fails the run.

use std::path::PathBuf;

/// The three reference models: (key, file name).
pub const MODELS: &[(&str, &str)] = &[
    ("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("gemma3", "gemma-3-270m-q4_k_m.gguf"),
    ("qwen2", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
];

/// Reference JSON file names, by model key.
pub const REFERENCES: &[(&str, &str)] = &[
    ("smollm2", "smollm2-135m.dev.json"),
    ("gemma3", "gemma3-270m.dev.json"),
    ("qwen2", "qwen2.5-coder-0.5b.dev.json"),
];

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn models_dir() -> PathBuf {
    std::env::var_os("WEFT_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("models"))
}

pub fn reference_dir() -> PathBuf {
    std::env::var_os("WEFT_REFERENCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/reference"))
}

fn missing(what: &str, path: &std::path::Path) -> Option<PathBuf> {
    if std::env::var_os("CI").is_some() {
        panic!(
            "{what} {} is missing; CI requires it (run scripts/fetch-models.sh)",
            path.display()
        );
    }
    eprintln!(
        "\n*** SKIPPING: {what} {} is missing (run scripts/fetch-models.sh) ***\n",
        path.display()
    );
    None
}

/// Path of a reference model by key (`smollm2`, `gemma3`, `qwen2`), or None (after a loud
/// message) when it is absent outside CI.
pub fn model_path(key: &str) -> Option<PathBuf> {
    let file = MODELS
        .iter()
        .find(|(k, _)| *k == key)
        .unwrap_or_else(|| panic!("unknown model key {key}"))
        .1;
    let p = models_dir().join(file);
    if p.exists() {
        Some(p)
    } else {
        missing("model", &p)
    }
}

/// Parsed reference JSON for a model key, or None (after a loud message) when absent outside CI.
pub fn reference(key: &str) -> Option<serde_json::Value> {
    let file = REFERENCES
        .iter()
        .find(|(k, _)| *k == key)
        .unwrap_or_else(|| panic!("unknown model key {key}"))
        .1;
    let p = reference_dir().join(file);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(_) => return missing("reference data", &p).map(|_| unreachable!()),
    };
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}
