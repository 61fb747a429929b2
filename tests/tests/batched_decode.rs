//! One decode step over B sequences on the CPU backend (Qwen2.5 0.5B Q4_K_M, the model of the
//! throughput benchmark): each weight matrix is streamed once per step whatever B is (the
//! backend's weight meter counts the bytes handed to the product kernels), and every
//! sequence's logits are bit-identical to the same step run for that sequence alone.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::KvDtype;
use weft_core::engine::{Engine, EngineConfig, Row};
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::test_support::model_path;
use weft_core::tokenizer::Tokenizer;

const MAX_B: usize = 16;

/// The `B` sequences' next tokens, one row each (all logits wanted).
fn rows(seqs: &[u32], next: &[u32]) -> Vec<Row> {
    seqs.iter()
        .zip(next)
        .map(|(&seq, &token)| Row {
            seq,
            token,
            logits: true,
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_batched_step_streams_each_weight_once_and_matches_each_sequence_alone() {
    let Some(path) = model_path("qwen2") else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let tok = Tokenizer::from_gguf(&file.gguf).unwrap();
    let backend = CpuBackend::new(2);
    let meter = backend.weight_meter();
    let cfg = EngineConfig {
        kv: KvCacheConfig {
            n_ctx: 128,
            n_seq: MAX_B,
            dtype: KvDtype::F16,
            pool_tokens: None,
        },
        max_batch: 64,
    };
    let mut e = Engine::load(file, Box::new(backend), cfg, &mut |_, _| {}).unwrap();

    // Sixteen sequences with prompts of different lengths, so their attention spans differ.
    let seqs: Vec<u32> = (0..MAX_B).map(|_| e.new_sequence().unwrap()).collect();
    let mut lens = Vec::new();
    let mut next = Vec::new();
    for (i, &s) in seqs.iter().enumerate() {
        let words = [
            "one", "two", "three", "four", "five", "six", "seven", "eight",
        ];
        let prompt = format!("Count with me: {}", words[..1 + i % words.len()].join(", "));
        let ids = tok.encode(&prompt, true, false);
        e.prefill(s, &ids).unwrap();
        lens.push(ids.len());
        // A different next token per sequence.
        next.push(tok.encode(&format!(" {}", words[i % words.len()]), false, false)[0]);
    }
    let rewind = |e: &mut Engine, b: usize| {
        for (&s, &len) in seqs[..b].iter().zip(&lens) {
            e.truncate(s, len).unwrap();
        }
    };

    // Each sequence's step alone: its logits and the weight bytes one step streams.
    let mut alone = Vec::new();
    let mut one_step_bytes = None;
    for i in 0..MAX_B {
        let before = meter.load(Ordering::Relaxed);
        let l = e.step(&rows(&seqs[i..i + 1], &next[i..i + 1])).unwrap();
        let bytes = meter.load(Ordering::Relaxed) - before;
        assert_eq!(*one_step_bytes.get_or_insert(bytes), bytes);
        e.truncate(seqs[i], lens[i]).unwrap();
        alone.push(bits(&l[0]));
    }
    let one_step_bytes = one_step_bytes.unwrap();
    // At least the model's transformer weights (~0.4 GB of Q4_K/Q6_K for 0.5B parameters).
    assert!(
        one_step_bytes > 200 << 20,
        "{one_step_bytes} bytes in a step"
    );

    for b in [2, 3, 4, 5, 8, 9, 12, 16] {
        let before = meter.load(Ordering::Relaxed);
        let logits = e.step(&rows(&seqs[..b], &next[..b])).unwrap();
        let bytes = meter.load(Ordering::Relaxed) - before;
        rewind(&mut e, b);
        assert_eq!(
            bytes, one_step_bytes,
            "a step of {b} sequences streamed {bytes} weight bytes, one alone {one_step_bytes}"
        );
        assert_eq!(logits.len(), b);
        for (i, l) in logits.iter().enumerate() {
            assert!(
                bits(l) == alone[i],
                "B = {b}: sequence {i}'s logits differ from its step alone"
            );
        }
    }
}
