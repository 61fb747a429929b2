//! `weft_core::scheduler` on a real model: batched generation equals one-at-a-time greedy
//! generation, prefix reuse keeps results identical, cancellation and the queue bound.

use std::sync::mpsc;
use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::KvDtype;
use weft_core::engine::{generate, Engine, EngineConfig, GenerateOptions, Greedy};
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::sampler::SamplerConfig;
use weft_core::scheduler::{
    Event, EventSink, Finish, Request, Scheduler, SchedulerConfig, SubmitError, Summary,
};
use weft_core::test_support::model_path;
use weft_core::tokenizer::Tokenizer;

struct Sink(mpsc::Sender<Event>);

impl EventSink for Sink {
    fn send(&mut self, e: Event) -> bool {
        self.0.send(e).is_ok()
    }
}

fn engine(file: &Arc<ModelFile>, n_seq: usize) -> Engine {
    let cfg = EngineConfig {
        kv: KvCacheConfig {
            n_ctx: 256,
            n_seq,
            dtype: KvDtype::F16,
        },
        max_batch: 64,
    };
    Engine::load(
        file.clone(),
        Box::new(CpuBackend::new(2)),
        cfg,
        &mut |_, _| {},
    )
    .unwrap()
}

fn request(prompt: Vec<u32>, max_tokens: usize, tx: mpsc::Sender<Event>) -> Request {
    Request {
        prompt,
        sampling: SamplerConfig::greedy(),
        max_tokens,
        stop: vec![],
        ignore_eos: true,
        logprobs: None,
        json: None,
        sink: Box::new(Sink(tx)),
    }
}

/// Collects (token ids, summary) from one request's events.
fn drain(rx: mpsc::Receiver<Event>) -> (Vec<u32>, Summary) {
    let mut ids = Vec::new();
    for e in rx {
        match e {
            Event::Delta { tokens, .. } => ids.extend(tokens.iter().map(|t| t.id)),
            Event::Done(s) => return (ids, s),
            Event::Failed(m) => panic!("failed: {m}"),
            Event::Started { .. } => {}
        }
    }
    panic!("no Done event")
}

#[test]
fn batched_greedy_equals_sequential_and_prefix_reuse_is_exact() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let tok = Arc::new(Tokenizer::from_gguf(&file.gguf).unwrap());
    let prompts: Vec<Vec<u32>> = [
        "The sky is",
        "My favourite food is",
        "Rust is a language that",
        "One, two, three,",
    ]
    .iter()
    .map(|p| tok.encode(p, true, false))
    .collect();
    const N: usize = 6;

    // One at a time, with the plain generation loop.
    let mut e1 = engine(&file, 1);
    let mut alone = Vec::new();
    for p in &prompts {
        let seq = e1.new_sequence().unwrap();
        let opts = GenerateOptions {
            max_tokens: N,
            ignore_eos: true,
            ..Default::default()
        };
        alone.push(
            generate(&mut e1, seq, p, &opts, &mut Greedy, &mut |_| true)
                .unwrap()
                .tokens,
        );
        e1.free_sequence(seq).unwrap();
    }
    drop(e1);

    // All at once through the scheduler (prefill chunks of 5 so prompts span several steps).
    let (sched, handle) = Scheduler::new(
        engine(&file, 4),
        tok.clone(),
        SchedulerConfig {
            queue: 8,
            step_tokens: 5 + 4,
        },
    )
    .unwrap();
    let runner = std::thread::spawn(move || sched.run());
    let rxs: Vec<_> = prompts
        .iter()
        .map(|p| {
            let (tx, rx) = mpsc::channel();
            handle.submit(request(p.clone(), N, tx)).unwrap();
            rx
        })
        .collect();
    let together: Vec<(Vec<u32>, Summary)> = rxs.into_iter().map(drain).collect();
    for (i, ((ids, s), a)) in together.iter().zip(&alone).enumerate() {
        assert_eq!(ids, a, "prompt {i} differs when batched");
        assert_eq!(
            (s.finish, s.completion_tokens, s.cached_tokens),
            (Finish::Length, N, 0)
        );
    }
    let steps = handle.stats().snapshot().steps;
    assert!(steps < (4 * N) as u64, "{steps} steps: no sharing");

    // A follow-up that extends prompt 0 and its answer reuses them, with the same result as a
    // fresh run of the whole text.
    let mut follow = prompts[0].clone();
    follow.extend(&together[0].0);
    follow.extend(tok.encode(" and the grass is", false, false));
    let (tx, rx) = mpsc::channel();
    handle.submit(request(follow.clone(), N, tx)).unwrap();
    let (ids, s) = drain(rx);
    assert!(s.cached_tokens >= prompts[0].len() + N - 1, "{s:?}");
    let mut e2 = engine(&file, 1);
    let seq = e2.new_sequence().unwrap();
    let opts = GenerateOptions {
        max_tokens: N,
        ignore_eos: true,
        ..Default::default()
    };
    let fresh = generate(&mut e2, seq, &follow, &opts, &mut Greedy, &mut |_| true)
        .unwrap()
        .tokens;
    assert_eq!(ids, fresh, "prefix reuse changed the result");

    // A receiver that is gone cancels the request.
    let (tx, rx) = mpsc::channel();
    drop(rx);
    handle.submit(request(prompts[1].clone(), 50, tx)).unwrap();
    // Shutdown fails requests still waiting; let the runner see the closed sink first.
    for _ in 0..3000 {
        if handle.stats().snapshot().requests_cancelled >= 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    handle.shutdown();
    runner.join().unwrap();
    let st = handle.stats().snapshot();
    assert_eq!(st.requests_cancelled, 1);
    assert_eq!(
        handle.submit(request(vec![1], 1, mpsc::channel().0)),
        Err(SubmitError::ShuttingDown)
    );
}

#[test]
fn a_full_queue_refuses_requests() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let tok = Arc::new(Tokenizer::from_gguf(&file.gguf).unwrap());
    // The scheduler is not running: submissions pile up in the queue.
    let (_sched, handle) = Scheduler::new(
        engine(&file, 1),
        tok,
        SchedulerConfig {
            queue: 2,
            step_tokens: 8,
        },
    )
    .unwrap();
    let (tx, _rx) = mpsc::channel();
    handle.submit(request(vec![1, 2], 1, tx.clone())).unwrap();
    handle.submit(request(vec![1, 2], 1, tx.clone())).unwrap();
    assert_eq!(
        handle.submit(request(vec![1, 2], 1, tx)),
        Err(SubmitError::QueueFull(2))
    );
    assert_eq!(handle.stats().snapshot().requests_rejected, 1);
}
