//! `weft_core::scheduler` with a prompt holding embedding rows (an image's place, Gemma 3's
//! layout): the scheduled greedy tokens equal `Session::generate_prompt` on its own engine;
//! the same prompt again reuses the cache up to its last token, through the image; another
//! image with the same text reuses only what comes before it; a text request beside it is
//! unchanged.

use std::sync::mpsc;
use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::KvDtype;
use weft_core::engine::{EngineConfig, Prompt, PromptPiece};
use weft_core::generation::GenParams;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::loaded::LoadedModel;
use weft_core::sampler::SamplerConfig;
use weft_core::scheduler::{
    Event, EventSink, MediaPrompt, Request, Scheduler, SchedulerConfig, Summary,
};
use weft_core::test_support::model_path;

struct Sink(mpsc::Sender<Event>);

impl EventSink for Sink {
    fn send(&mut self, e: Event) -> bool {
        self.0.send(e).is_ok()
    }
}

fn config() -> EngineConfig {
    EngineConfig {
        kv: KvCacheConfig {
            n_ctx: 1024,
            n_seq: 1,
            dtype: KvDtype::F16,
            pool_tokens: None,
        },
        max_batch: 256,
    }
}

fn load(path: &std::path::Path) -> LoadedModel {
    LoadedModel::open(path, Box::new(CpuBackend::new(2)), config(), &mut |_, _| {}).unwrap()
}

/// 64 rows of width `d`, from a seed (small values, as projector outputs are).
fn rows(seed: u32, d: usize) -> Arc<[f32]> {
    let mut x = seed.wrapping_mul(2654435761).max(1);
    (0..64 * d)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as f32 / u32::MAX as f32 - 0.5) * 0.2
        })
        .collect()
}

fn image_prompt(m: &LoadedModel, seed: u32) -> Prompt {
    let d = m.engine.model_info().n_embd;
    let start = m.tokenizer.token_id("<start_of_image>").unwrap();
    let end = m.tokenizer.token_id("<end_of_image>").unwrap();
    let before = m.encode_prompt("<start_of_turn>user\n", true);
    let after = m.encode_prompt(
        "Describe this image.<end_of_turn>\n<start_of_turn>model\n",
        false,
    );
    let mut head = before;
    head.push(start);
    let mut tail = vec![end];
    tail.extend(after);
    Prompt {
        pieces: vec![
            PromptPiece::Tokens(head),
            PromptPiece::Embeddings {
                data: rows(seed, d),
                n: 64,
                bidirectional: true,
            },
            PromptPiece::Tokens(tail),
        ],
    }
}

/// Runs one request to its end: (tokens, summary, cached tokens at start).
fn run(
    handle: &weft_core::scheduler::Handle,
    prompt: Vec<u32>,
    media: Option<MediaPrompt>,
    n: usize,
) -> (Vec<u32>, Summary, usize) {
    let (tx, rx) = mpsc::channel();
    handle
        .submit(Request {
            prompt,
            sampling: SamplerConfig::greedy(),
            max_tokens: n,
            stop: vec![],
            ignore_eos: true,
            logprobs: None,
            json: None,
            media: media.map(Arc::new),
            sink: Box::new(Sink(tx)),
        })
        .unwrap();
    let mut tokens = Vec::new();
    let mut cached = usize::MAX;
    loop {
        match rx.recv().unwrap() {
            Event::Started { cached_tokens, .. } => cached = cached_tokens,
            Event::Delta { tokens: t, .. } => tokens.extend(t.iter().map(|t| t.id)),
            Event::Done(s) => return (tokens, s, cached),
            Event::Failed(e) => panic!("{e}"),
            Event::Queued { .. } => {}
        }
    }
}

#[test]
fn image_prompts_schedule_like_a_session_and_reuse_the_cache() {
    let Some(path) = model_path("gemma3") else {
        return;
    };
    let mut alone = load(&path);
    let n = 8;
    let prompt = image_prompt(&alone, 1);
    let placeholder = alone.tokenizer.pad().unwrap_or(0);
    let params = GenParams {
        sampling: SamplerConfig::greedy(),
        max_tokens: n,
        ignore_eos: true,
        ..GenParams::default()
    };
    let mut session = alone.session().unwrap();
    let want = session
        .generate_prompt(&mut alone, &prompt, placeholder, &params, &mut |_| true)
        .unwrap()
        .tokens;
    let text_ids = alone.encode_prompt("Once upon a time", true);
    session.reset(&mut alone.engine).unwrap();
    let want_text = session
        .generate(&mut alone, &text_ids, &params, &mut |_| true)
        .unwrap()
        .tokens;

    let m = load(&path);
    let other = image_prompt(&m, 2);
    let (sched, handle) =
        Scheduler::new(m.engine, m.tokenizer.clone(), SchedulerConfig::default()).unwrap();
    let runner = std::thread::spawn(move || sched.run());
    let media = |p: &Prompt| MediaPrompt {
        prompt: p.clone(),
        placeholder,
    };
    let keys = prompt.cache_keys();
    let (got, s, cached) = run(&handle, keys.clone(), Some(media(&prompt)), n);
    assert_eq!(got, want);
    assert_eq!((s.prompt_tokens, cached), (prompt.len(), 0));
    // Again: everything but the last prompt token comes from the cache, image included.
    let (again, s, cached) = run(&handle, keys.clone(), Some(media(&prompt)), n);
    assert_eq!(again, want);
    assert_eq!(
        (s.cached_tokens, cached),
        (prompt.len() - 1, prompt.len() - 1)
    );
    // Another image, same text: only the tokens before it are reused.
    let head = match &prompt.pieces[0] {
        PromptPiece::Tokens(t) => t.len(),
        _ => unreachable!(),
    };
    let (_, _, cached) = run(&handle, other.cache_keys(), Some(media(&other)), n);
    assert_eq!(cached, head);
    // A text request on the same scheduler is unchanged.
    let (text, _, _) = run(&handle, text_ids, None, n);
    assert_eq!(text, want_text);
    handle.shutdown();
    runner.join().unwrap();
}
