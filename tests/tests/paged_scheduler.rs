//! The scheduler over a paged KV cache whose block pool is smaller than a full context per
//! sequence: short requests run together beyond what full-context slots would allow, and when
//! the pool runs out mid-generation sequences are preempted and fed again, with every greedy
//! stream the same as running alone.

use std::sync::mpsc;
use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::{KvDtype, KV_BLOCK};
use weft_core::engine::{Engine, EngineConfig};
use weft_core::generation::{GenParams, Session};
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::loaded::LoadedModel;
use weft_core::sampler::SamplerConfig;
use weft_core::scheduler::{Event, EventSink, Request, Scheduler, SchedulerConfig};
use weft_core::test_support::model_path;
use weft_core::tokenizer::Tokenizer;

const N_CTX: usize = 4 * KV_BLOCK;
const N_SEQ: usize = 8;
/// Two full contexts: full-context slots would serve two sequences at once.
const POOL: usize = 2 * N_CTX;

/// Tags each event with its request.
struct Sink(usize, mpsc::Sender<(usize, Event)>);

impl EventSink for Sink {
    fn send(&mut self, e: Event) -> bool {
        self.1.send((self.0, e)).is_ok()
    }
}

fn prompts(tok: &Tokenizer) -> Vec<Vec<u32>> {
    [
        "The sky is",
        "My favourite food is",
        "Rust is a language that",
        "One, two, three,",
        "Once upon a time",
        "The capital of France",
        "To bake bread you need",
        "def fibonacci(n):",
    ]
    .iter()
    .map(|p| tok.encode(p, true, false))
    .collect()
}

/// Each prompt's `n` greedy tokens on an engine of its own.
fn alone(file: &Arc<ModelFile>, prompts: &[Vec<u32>], n: usize) -> Vec<Vec<u32>> {
    let cfg = EngineConfig {
        kv: KvCacheConfig {
            n_ctx: N_CTX,
            ..Default::default()
        },
        max_batch: 64,
    };
    let backend = Box::new(CpuBackend::new(2));
    let mut m = LoadedModel::from_file(file.clone(), backend, cfg, &mut |_, _| {}).unwrap();
    let mut s: Session = m.session().unwrap();
    let params = GenParams {
        sampling: SamplerConfig::greedy(),
        max_tokens: n,
        ignore_eos: true,
        ..GenParams::default()
    };
    prompts
        .iter()
        .map(|p| {
            s.reset(&mut m.engine).unwrap();
            s.generate(&mut m, p, &params, &mut |_| true)
                .unwrap()
                .tokens
        })
        .collect()
}

/// Runs every prompt at once through a scheduler on the small pool. Returns each request's
/// tokens, the order events of kinds Started (true) and Done (false) arrived in, and the
/// scheduler's preemption count.
fn batched(
    file: &Arc<ModelFile>,
    tok: &Arc<Tokenizer>,
    prompts: &[Vec<u32>],
    n: usize,
) -> (Vec<Vec<u32>>, Vec<bool>, u64) {
    let cfg = EngineConfig {
        kv: KvCacheConfig {
            n_ctx: N_CTX,
            n_seq: N_SEQ,
            dtype: KvDtype::F16,
            pool_tokens: Some(POOL),
        },
        max_batch: 64,
    };
    let engine = Engine::load(
        file.clone(),
        Box::new(CpuBackend::new(2)),
        cfg,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(engine.seqs().n_blocks() * KV_BLOCK, POOL);
    let (sched, handle) = Scheduler::new(
        engine,
        tok.clone(),
        SchedulerConfig {
            queue: 16,
            step_tokens: 16,
        },
    )
    .unwrap();
    let (tx, rx) = mpsc::channel();
    // Every request is queued before the loop starts, so all are considered at once.
    for (i, p) in prompts.iter().enumerate() {
        handle
            .submit(Request {
                prompt: p.clone(),
                sampling: SamplerConfig::greedy(),
                max_tokens: n,
                stop: vec![],
                ignore_eos: true,
                logprobs: None,
                json: None,
                media: None,
                sink: Box::new(Sink(i, tx.clone())),
            })
            .unwrap();
    }
    drop(tx);
    let stats = handle.stats().clone();
    let thread = std::thread::spawn(move || sched.run());
    let mut out = vec![Vec::new(); prompts.len()];
    let mut order = Vec::new();
    let mut done = 0;
    for (i, e) in rx.iter() {
        match e {
            Event::Delta { tokens, .. } => out[i].extend(tokens.iter().map(|t| t.id)),
            Event::Started { .. } => order.push(true),
            Event::Done(_) => {
                order.push(false);
                done += 1;
                if done == prompts.len() {
                    break;
                }
            }
            Event::Failed(f) => panic!("request {i} failed: {f}"),
            Event::Queued { .. } => {}
        }
    }
    handle.shutdown();
    thread.join().unwrap();
    let s = stats.snapshot();
    assert_eq!(s.requests_finished, prompts.len() as u64);
    assert_eq!(s.kv_capacity, POOL as u64);
    (out, order, s.preemptions)
}

#[test]
fn short_requests_share_a_pool_smaller_than_their_full_contexts() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let tok = Arc::new(Tokenizer::from_gguf(&file.gguf).unwrap());
    let prompts = prompts(&tok);
    // Short enough that prompt and answer stay within one block each.
    const N: usize = 20;
    assert!(prompts.iter().all(|p| p.len() + N < KV_BLOCK));
    let want = alone(&file, &prompts, N);
    let (got, order, preemptions) = batched(&file, &tok, &prompts, N);
    assert_eq!(got, want);
    // All eight started before any finished: four times what full-context slots would hold.
    assert_eq!(order.iter().take_while(|&&s| s).count(), N_SEQ);
    assert_eq!(preemptions, 0);
}

#[test]
fn running_out_of_blocks_preempts_and_every_request_completes_unchanged() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let tok = Arc::new(Tokenizer::from_gguf(&file.gguf).unwrap());
    let prompts = prompts(&tok);
    // Every sequence grows into a second block: eight of them need twice the pool.
    const N: usize = 70;
    let want = alone(&file, &prompts, N);
    let (got, _, preemptions) = batched(&file, &tok, &prompts, N);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "request {i}");
    }
    assert!(preemptions > 0, "the pool never ran out");
}
