//! The forward pass against llama.cpp: greedy decoding over raw logits from each reference
//! case's `prompt_ids` must give the reference tokens up to the first near-tie (margin < 0.3),
//! with the same top-5 ids and logits within 1.0 at every compared step.

use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::KvDtype;
use weft_core::engine::{Engine, EngineConfig};
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::test_support::{model_path, reference};

const MIN_MARGIN: f64 = 0.3;
const LOGIT_TOLERANCE: f64 = 1.0;

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Checks one step's logits against a reference step; returns false past the comparable range.
fn check_step(case: usize, i: usize, step: &serde_json::Value, logits: &[f32]) -> bool {
    let margin = step["margin"].as_f64().unwrap();
    if margin < MIN_MARGIN {
        return false;
    }
    let want_token = step["token"].as_u64().unwrap() as u32;
    let top5_ref: Vec<(u32, f64)> = step["top5"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap() as u32, p[1].as_f64().unwrap()))
        .collect();
    let mine = weft_core::backend::top_k_host(logits, 5);
    let got_token = mine[0].0;
    assert_eq!(
        got_token, want_token,
        "case {case} step {i}: token {got_token}, reference {want_token}; mine {mine:?}, reference {top5_ref:?}"
    );
    let mut a: Vec<u32> = mine.iter().map(|p| p.0).collect();
    let mut b: Vec<u32> = top5_ref.iter().map(|p| p.0).collect();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(
        a, b,
        "case {case} step {i}: top-5 sets differ: mine {mine:?}, reference {top5_ref:?}"
    );
    for (id, l) in &top5_ref {
        let got = logits[*id as usize] as f64;
        assert!(
            (got - l).abs() <= LOGIT_TOLERANCE,
            "case {case} step {i}: logit of {id} is {got}, reference {l}"
        );
    }
    true
}

fn run_model(key: &str, kv: KvDtype) {
    let (Some(path), Some(reference)) = (model_path(key), reference(key)) else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let cfg = EngineConfig {
        kv: KvCacheConfig {
            n_ctx: 256,
            n_seq: 1,
            dtype: kv,
        },
        max_batch: 64,
    };
    let mut engine = Engine::load(file, Box::new(CpuBackend::new(2)), cfg, &mut |_, _| {}).unwrap();
    let seq = engine.new_sequence().unwrap();
    let mut compared = 0;
    for (ci, case) in reference["cases"].as_array().unwrap().iter().enumerate() {
        engine.truncate(seq, 0).unwrap();
        let prompt = ids(&case["prompt_ids"]);
        let mut logits = engine.prefill(seq, &prompt).unwrap();
        for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
            if !check_step(ci, i, step, &logits) {
                break;
            }
            compared += 1;
            let tok = step["token"].as_u64().unwrap() as u32;
            logits = engine.decode(seq, tok).unwrap();
        }
    }
    eprintln!("{key}: {compared} steps compared");
    assert!(
        compared >= 10,
        "{key}: too few comparable steps ({compared})"
    );
}

#[test]
fn smollm2_matches_llama_cpp() {
    run_model("smollm2", KvDtype::F16);
}

#[test]
fn gemma3_matches_llama_cpp() {
    run_model("gemma3", KvDtype::F16);
}

#[test]
fn qwen2_matches_llama_cpp() {
    run_model("qwen2", KvDtype::F16);
}

#[test]
fn f32_cache_matches_too() {
    run_model("smollm2", KvDtype::F32);
}
