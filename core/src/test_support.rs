//! Locating the reference models and llama.cpp reference data from tests.
//!
//! Models live in `models/` at the workspace root (fetched by `scripts/fetch-models.sh`), or in
//! `$WEFT_MODELS_DIR`. Reference data (llama.cpp's outputs) lives in `tests/reference/` inside the
//! repository, or in `$WEFT_REFERENCE_DIR`. When a model is missing, tests skip loudly — except under CI
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
        .unwrap_or_else(|| workspace_root().join("tests/reference"))
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

/// The reference comparison (the reference README's rules): steps are compared while the
/// reference's top-1/top-2 margin is at least this...
pub const MIN_MARGIN: f64 = 0.3;
/// ...our token must be the reference's, and every reference top-5 logit within this of ours
/// (raw, no centring)...
pub const LOGIT_TOLERANCE: f64 = 1.0;
/// ...and the top-5 ids agree as sets, except that a reference id may be missing from ours when
/// our logit for it is within this of our 5th (a near-tie at the set boundary).
pub const BOUNDARY_TIE: f64 = 0.4;

/// A JSON array of token ids.
pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("an array of token ids")
        .iter()
        .map(|x| x.as_u64().expect("a token id") as u32)
        .collect()
}

/// What one compared step found.
pub struct StepCheck {
    /// Disagreements, each naming `here` (empty when the step matches).
    pub bad: Vec<String>,
    /// How far below our 5th logit a reference top-5 id we lack lies (0 when none is missing).
    pub boundary_gap: f64,
}

/// Checks our `logits` at one reference `step` by the rules above; `here` names the step in
/// messages. None past the comparable range (a reference margin below [`MIN_MARGIN`]).
pub fn check_step(here: &str, step: &serde_json::Value, logits: &[f32]) -> Option<StepCheck> {
    if step["margin"].as_f64().expect("margin") < MIN_MARGIN {
        return None;
    }
    let want = step["token"].as_u64().expect("token") as u32;
    let top5: Vec<(u32, f64)> = step["top5"]
        .as_array()
        .expect("top5")
        .iter()
        .map(|p| (p[0].as_u64().unwrap() as u32, p[1].as_f64().unwrap()))
        .collect();
    let mine = crate::backend::top_k_host(logits, 5);
    let here = format!("{here}: mine {mine:?}, reference {top5:?}");
    let mut bad = Vec::new();
    if mine[0].0 != want {
        bad.push(format!("{here}: token {} instead of {want}", mine[0].0));
    }
    let fifth = mine[4].1 as f64;
    let mut boundary_gap = 0f64;
    for (id, l) in &top5 {
        let got = logits[*id as usize] as f64;
        if !mine.iter().any(|p| p.0 == *id) {
            boundary_gap = boundary_gap.max(fifth - got);
            if fifth - got > BOUNDARY_TIE {
                bad.push(format!(
                    "{here}: reference top-5 id {id} is {:.3} below our 5th logit",
                    fifth - got
                ));
            }
        }
        if (got - l).abs() > LOGIT_TOLERANCE {
            bad.push(format!("{here}: logit of {id} is {got}, reference {l}"));
        }
    }
    Some(StepCheck { bad, boundary_gap })
}

/// The all-MiniLM-L6-v2 folder (`scripts/fetch-models.sh minilm`), or None (after a loud
/// message) when it is absent outside CI.
pub fn minilm_dir() -> Option<PathBuf> {
    let p = models_dir().join("all-MiniLM-L6-v2");
    if p.join("model.safetensors").exists() {
        Some(p)
    } else {
        missing("model folder", &p)
    }
}

/// The sentence-transformers reference vectors (`tests/reference/all-MiniLM-L6-v2.embeddings.json`,
/// made by `scripts/make-embedding-reference.sh`): per sentence `text`, `ids`, `embedding`
/// (normalised) and `pooled` (before normalisation).
pub fn embedding_reference() -> serde_json::Value {
    let p = reference_dir().join("all-MiniLM-L6-v2.embeddings.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A JSON array of floats.
pub fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .expect("an array of numbers")
        .iter()
        .map(|x| x.as_f64().expect("a number") as f32)
        .collect()
}

/// The cosine every embedding must reach against the reference.
pub const EMBED_MIN_COSINE: f64 = 0.9999;
