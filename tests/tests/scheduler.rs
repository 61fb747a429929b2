//! `weft_core::scheduler` on a real model: batched generation equals one-at-a-time greedy
//! generation (a [`Session`] on its own engine), prefix reuse keeps results identical,
//! cancellation and the queue bound.

use std::sync::mpsc;
use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::KvDtype;
use weft_core::engine::{Engine, EngineConfig};
use weft_core::generation::{GenParams, Session};
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::loaded::LoadedModel;
use weft_core::sampler::{JsonSchema, SamplerConfig};
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

fn config(n_seq: usize) -> EngineConfig {
    EngineConfig {
        kv: KvCacheConfig {
            n_ctx: 256,
            n_seq,
            dtype: KvDtype::F16,
            pool_tokens: None,
        },
        max_batch: 64,
    }
}

fn engine(file: &Arc<ModelFile>, n_seq: usize) -> Engine {
    let backend = Box::new(CpuBackend::new(2));
    Engine::load(file.clone(), backend, config(n_seq), &mut |_, _| {}).unwrap()
}

/// One sequence on its own, with nothing cached: `n` greedy tokens after `prompt`.
fn generate_alone(m: &mut LoadedModel, s: &mut Session, prompt: &[u32], n: usize) -> Vec<u32> {
    let params = GenParams {
        sampling: SamplerConfig::greedy(),
        max_tokens: n,
        ignore_eos: true,
        ..GenParams::default()
    };
    s.reset(&mut m.engine).unwrap();
    s.generate(m, prompt, &params, &mut |_| true)
        .unwrap()
        .tokens
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
        media: None,
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
            Event::Started { .. } | Event::Queued { .. } => {}
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

    // One at a time, each on a sequence of its own.
    let backend = Box::new(CpuBackend::new(2));
    let mut m1 = LoadedModel::from_file(file.clone(), backend, config(1), &mut |_, _| {}).unwrap();
    let mut s1 = m1.session().unwrap();
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| generate_alone(&mut m1, &mut s1, p, N))
        .collect();

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
    let fresh = generate_alone(&mut m1, &mut s1, &follow, N);
    drop(m1);
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

/// The scheduler and a [`Session`] run the same per-sequence logic: seeded sampling with
/// penalties and a stop string, and a JSON-schema constraint, give the same tokens, text and
/// finish either way.
#[test]
fn session_and_scheduler_agree_on_sampling_stops_and_json() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let backend = Box::new(CpuBackend::new(2));
    let mut m = LoadedModel::from_file(file.clone(), backend, config(1), &mut |_, _| {}).unwrap();
    let mut session = m.session().unwrap();
    let (sched, handle) = Scheduler::new(
        engine(&file, 2),
        m.tokenizer.clone(),
        SchedulerConfig::default(),
    )
    .unwrap();
    let runner = std::thread::spawn(move || sched.run());
    let schema = serde_json::json!({"type": "object",
        "properties": {"answer": {"type": "integer"}}, "required": ["answer"]});
    let cases = [
        (
            "Once upon a time",
            GenParams {
                sampling: SamplerConfig {
                    temperature: 0.9,
                    seed: Some(7),
                    repeat_penalty: 1.3,
                    presence_penalty: 0.4,
                    frequency_penalty: 0.2,
                    ..SamplerConfig::default()
                },
                max_tokens: 16,
                // In this seed's story (", the British built Fort ...").
                stop: vec!["Fort".into()],
                ..GenParams::default()
            },
        ),
        (
            "The answer in JSON:",
            GenParams {
                sampling: SamplerConfig::greedy(),
                max_tokens: 24,
                json: Some(Arc::new(JsonSchema::compile(&schema).unwrap())),
                ..GenParams::default()
            },
        ),
    ];
    for (prompt, params) in cases {
        let ids = m.encode_prompt(prompt, false);
        session.reset(&mut m.engine).unwrap();
        let alone = session
            .generate(&mut m, &ids, &params, &mut |_| true)
            .unwrap();
        let (tx, rx) = mpsc::channel();
        handle
            .submit(Request {
                prompt: ids.clone(),
                sampling: params.sampling.clone(),
                max_tokens: params.max_tokens,
                stop: params.stop.clone(),
                ignore_eos: false,
                logprobs: None,
                json: params.json.clone(),
                media: None,
                sink: Box::new(Sink(tx)),
            })
            .unwrap();
        let mut text = String::new();
        let mut tokens = Vec::new();
        let summary = loop {
            match rx.recv().unwrap() {
                Event::Delta {
                    text: t,
                    tokens: ts,
                } => {
                    text.push_str(&t);
                    tokens.extend(ts.iter().map(|t| t.id));
                }
                Event::Done(s) => break s,
                Event::Failed(e) => panic!("{e}"),
                Event::Started { .. } | Event::Queued { .. } => {}
            }
        };
        eprintln!("{prompt:?}: {:?} {:?}", alone.text, alone.finish);
        assert_eq!(tokens, alone.tokens, "{prompt:?}");
        assert_eq!(text, alone.text, "{prompt:?}");
        assert_eq!(summary.finish, alone.finish, "{prompt:?}");
        // Both cases end early: at the stop string, and when the JSON value is complete.
        assert_eq!(alone.finish, Finish::Stop, "{prompt:?}: {:?}", alone.text);
    }
    handle.shutdown();
    runner.join().unwrap();
}

/// A request whose prompt starts like a running sequence's tokens starts from a copy of that
/// sequence's cache (in another slot) and gives the same tokens as a fresh run.
#[test]
fn a_shared_prompt_start_is_copied_from_a_running_sequence() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let tok = Arc::new(Tokenizer::from_gguf(&file.gguf).unwrap());
    let system = SYSTEM;
    let first = tok.encode(&format!("{system}Name a colour."), true, false);
    let second = tok.encode(&format!("{system}Name a planet."), true, false);
    let shared = first
        .iter()
        .zip(&second)
        .take_while(|(a, b)| a == b)
        .count();
    assert!(shared > 10, "the prompts share only {shared} tokens");
    const N: usize = 8;

    let backend = Box::new(CpuBackend::new(2));
    let mut m1 = LoadedModel::from_file(file.clone(), backend, config(1), &mut |_, _| {}).unwrap();
    let mut s1 = m1.session().unwrap();
    let alone = generate_alone(&mut m1, &mut s1, &second, N);
    drop(m1);

    let (sched, handle) = Scheduler::new(
        engine(&file, 2),
        tok.clone(),
        SchedulerConfig {
            queue: 4,
            step_tokens: 64,
        },
    )
    .unwrap();
    let runner = std::thread::spawn(move || sched.run());
    let (tx, rx_first) = mpsc::channel();
    handle.submit(request(first.clone(), 40, tx)).unwrap();
    // Once the first request streams, its prompt is in its cache.
    let mut first_ids = Vec::new();
    for e in rx_first.iter() {
        match e {
            Event::Delta { tokens, .. } if !tokens.is_empty() => {
                first_ids.extend(tokens.iter().map(|t| t.id));
                break;
            }
            Event::Failed(m) => panic!("failed: {m}"),
            _ => {}
        }
    }
    let (tx, rx) = mpsc::channel();
    handle.submit(request(second.clone(), N, tx)).unwrap();
    let (ids, s) = drain(rx);
    assert_eq!(s.cached_tokens, shared, "{s:?}");
    assert_eq!(ids, alone, "the copied prefix changed the result");
    let (rest, s_first) = drain(rx_first);
    assert_eq!(first_ids.len() + rest.len(), s_first.completion_tokens);
    let st = handle.stats().snapshot();
    assert_eq!((st.prefix_copies, st.prefix_cache_hits), (1, 1));
    handle.shutdown();
    runner.join().unwrap();
}

const SYSTEM: &str = "You are a careful assistant who answers every question in one short, \
    plain sentence, without lists. ";

/// Requests arriving together with one long shared start evaluate it once: the first one
/// evaluates it, the others wait for it and copy it; every answer is the same as a fresh
/// run's.
#[test]
fn requests_arriving_together_evaluate_a_shared_start_once() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let tok = Arc::new(Tokenizer::from_gguf(&file.gguf).unwrap());
    let prompts: Vec<Vec<u32>> = ["Name a colour.", "Name a planet.", "Name a fruit."]
        .iter()
        .map(|q| tok.encode(&format!("{SYSTEM}{q}"), true, false))
        .collect();
    // What each one shares with the first.
    let shared: Vec<usize> = prompts
        .iter()
        .map(|p| {
            p.iter()
                .zip(&prompts[0])
                .take_while(|(a, b)| a == b)
                .count()
        })
        .collect();
    assert!(shared[1] >= 20, "the prompts share only {shared:?} tokens");
    const N: usize = 6;
    let backend = Box::new(CpuBackend::new(2));
    let mut m1 = LoadedModel::from_file(file.clone(), backend, config(1), &mut |_, _| {}).unwrap();
    let mut s1 = m1.session().unwrap();
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| generate_alone(&mut m1, &mut s1, p, N))
        .collect();
    drop(m1);

    let (sched, handle) = Scheduler::new(
        engine(&file, 3),
        tok.clone(),
        SchedulerConfig {
            queue: 4,
            step_tokens: 64,
        },
    )
    .unwrap();
    // Queued before the loop runs: all three are waiting at its first admission.
    let rxs: Vec<_> = prompts
        .iter()
        .map(|p| {
            let (tx, rx) = mpsc::channel();
            handle.submit(request(p.clone(), N, tx)).unwrap();
            rx
        })
        .collect();
    let runner = std::thread::spawn(move || sched.run());
    for (i, (rx, want)) in rxs.into_iter().zip(&alone).enumerate() {
        let (ids, s) = drain(rx);
        assert_eq!(&ids, want, "prompt {i} differs");
        let cached = if i == 0 { 0 } else { shared[i] };
        assert_eq!(s.cached_tokens, cached, "prompt {i}: {s:?}");
    }
    let st = handle.stats().snapshot();
    assert_eq!(st.prefix_copies, 2);
    let total: usize = prompts.iter().map(Vec::len).sum();
    let copied: usize = shared[1..].iter().sum();
    assert_eq!(st.prompt_tokens as usize, total - copied);
    handle.shutdown();
    runner.join().unwrap();
}
