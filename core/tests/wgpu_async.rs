//! The non-blocking step path the browser uses (`Backend::submit` + `PendingStep::wait`, driven
//! by `Engine::step_async`) gives the same logits as the blocking `Engine::step`, on the wgpu
//! backend (natively on lavapipe) and on the CPU backend.

mod wgpu_support;

use std::sync::Arc;

use weft_core::backend::wgpu::WgpuOptions;
use weft_core::backend::{cpu::CpuBackend, Backend};
use weft_core::engine::{Engine, EngineConfig, Prompt, PromptPiece};
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::test_support::model_path;

fn cfg() -> EngineConfig {
    EngineConfig {
        kv: KvCacheConfig {
            n_ctx: 64,
            n_seq: 1,
            ..Default::default()
        },
        max_batch: 16,
    }
}

/// Prefill + 3 greedy decode steps, sync and async on two engines over the same backend
/// kind; every step's logits must be identical (same kernels, same order).
fn compare(make: &dyn Fn() -> Option<Box<dyn Backend>>) {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let (Some(b1), Some(b2)) = (make(), make()) else {
        return;
    };
    let mut sync = Engine::load(file.clone(), b1, cfg(), &mut |_, _| {}).unwrap();
    let mut asyn = Engine::load(file, b2, cfg(), &mut |_, _| {}).unwrap();
    let s1 = sync.new_sequence().unwrap();
    let s2 = asyn.new_sequence().unwrap();
    let prompt = [1u32, 504, 3458, 282, 4649, 314];
    let mut a = sync.prefill(s1, &prompt).unwrap();
    let mut b = pollster::block_on(asyn.prefill_async(s2, &prompt)).unwrap();
    for _ in 0..3 {
        assert_eq!(a, b, "async logits differ from sync logits");
        let tok = weft_core::sampler::argmax(&a);
        a = sync.decode(s1, tok).unwrap();
        b = pollster::block_on(asyn.decode_async(s2, tok)).unwrap();
    }
    assert_eq!(a, b);
    assert_eq!(sync.seqs().len(s1).unwrap(), asyn.seqs().len(s2).unwrap());
}

#[test]
fn async_step_matches_sync_on_wgpu() {
    compare(&|| {
        wgpu_support::backend(&WgpuOptions::default()).map(|b| Box::new(b) as Box<dyn Backend>)
    });
}

#[test]
fn async_step_matches_sync_on_cpu() {
    compare(&|| Some(Box::new(CpuBackend::new(1)) as Box<dyn Backend>));
}

/// A prompt holding embedding rows that attend to each other both ways (an image's), through
/// `prefill_prompt_async` (the browser's path) and `prefill_prompt`: identical logits.
fn compare_prompt(make: &dyn Fn() -> Option<Box<dyn Backend>>) {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let (Some(b1), Some(b2)) = (make(), make()) else {
        return;
    };
    let mut sync = Engine::load(file.clone(), b1, cfg(), &mut |_, _| {}).unwrap();
    let mut asyn = Engine::load(file, b2, cfg(), &mut |_, _| {}).unwrap();
    let d = sync.model_info().n_embd;
    let n = 8;
    // Deterministic rows of token-embedding scale.
    let rows: Vec<f32> = (0..n * d)
        .map(|i| ((i * 2654435761usize) % 1000) as f32 / 1000.0 - 0.5)
        .map(|v| v * 0.1)
        .collect();
    let prompt = Prompt {
        pieces: vec![
            PromptPiece::Tokens(vec![1, 504, 3458]),
            PromptPiece::Embeddings {
                data: rows.into(),
                n,
                bidirectional: true,
            },
            PromptPiece::Tokens(vec![282, 4649, 314]),
        ],
    };
    let s1 = sync.new_sequence().unwrap();
    let s2 = asyn.new_sequence().unwrap();
    let a = sync.prefill_prompt(s1, &prompt).unwrap();
    let b = pollster::block_on(asyn.prefill_prompt_async(s2, &prompt)).unwrap();
    assert_eq!(a, b, "async prompt logits differ from sync ones");
    assert_eq!(sync.seqs().len(s1).unwrap(), asyn.seqs().len(s2).unwrap());
}

#[test]
fn async_prompt_with_image_rows_matches_sync_on_wgpu() {
    compare_prompt(&|| {
        wgpu_support::backend(&WgpuOptions::default()).map(|b| Box::new(b) as Box<dyn Backend>)
    });
}

#[test]
fn async_prompt_with_image_rows_matches_sync_on_cpu() {
    compare_prompt(&|| Some(Box::new(CpuBackend::new(2))));
}
