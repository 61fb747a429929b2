//! The forward pass against llama.cpp: greedy decoding over raw logits from each reference
//! case's `prompt_ids` must give the reference tokens up to the first step whose reference
//! margin is below 0.3, with every reference top-5 logit within 1.0 of ours (raw, no
//! centring) at every compared step — the reference README's rules.
//!
//! One relaxation, measured: the top-5 ids must agree as sets, except that a reference top-5
//! id may be missing from ours when our logit for it is within `BOUNDARY_TIE` of our 5th
//! logit (a near-tie at the set boundary: the 5th and 6th candidates swap under noise of a
//! few tenths, which no engine short of bit-identical arithmetic avoids). After matching
//! llama.cpp's activation rounding the largest such gap over the three models is printed by
//! this test (`worst boundary gap`).
//!
//! Sensitivity, measured: the remaining differences are summation order and ulp-level
//! rounding, yet Gemma 3 amplifies them to a few tenths of a logit. Gemma 3 case 1 step 5
//! (reference margin 0.489) passes by 0.05 only; forming RMSNorm's squares in f32 instead of
//! f64 (an ulp-level change) flips it.

use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::KvDtype;
use weft_core::engine::{Engine, EngineConfig};
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::test_support::{check_step, ids, model_path, reference};

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
            pool_tokens: None,
        },
        max_batch: 64,
    };
    let mut engine = Engine::load(file, Box::new(CpuBackend::new(2)), cfg, &mut |_, _| {}).unwrap();
    let seq = engine.new_sequence().unwrap();
    let mut compared = 0;
    let mut failures = Vec::new();
    let mut worst_gap = 0f64;
    let mut worst_diff = 0f64;
    for (ci, case) in reference["cases"].as_array().unwrap().iter().enumerate() {
        engine.truncate(seq, 0).unwrap();
        let prompt = ids(&case["prompt_ids"]);
        let mut logits = engine.prefill(seq, &prompt).unwrap();
        for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
            match check_step(&format!("case {ci} step {i}"), step, &logits) {
                None => break,
                Some(c) => {
                    failures.extend(c.bad);
                    worst_gap = worst_gap.max(c.boundary_gap);
                }
            }
            for p in step["top5"].as_array().unwrap() {
                let l = p[1].as_f64().unwrap();
                worst_diff =
                    worst_diff.max((logits[p[0].as_u64().unwrap() as usize] as f64 - l).abs());
            }
            compared += 1;
            let tok = step["token"].as_u64().unwrap() as u32;
            logits = engine.decode(seq, tok).unwrap();
        }
    }
    eprintln!(
        "{key}: {compared} steps compared, worst logit difference {worst_diff:.3}, \
         worst boundary gap {worst_gap:.3}"
    );
    for f in &failures {
        eprintln!("MISMATCH {key} {f}");
    }
    assert!(failures.is_empty(), "{key}: {} mismatches", failures.len());
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
