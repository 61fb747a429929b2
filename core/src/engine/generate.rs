//! The generation loop for one sequence: prefill the prompt, then pick and feed back one token
//! at a time until a limit, an end-of-generation id, or the caller says stop.

/// A stopwatch that reads 0 where the platform has no clock (`Instant::now` panics on
/// wasm32-unknown-unknown; the browser build times steps on the JavaScript side).
struct Stopwatch {
    #[cfg(not(target_arch = "wasm32"))]
    start: std::time::Instant,
}

impl Stopwatch {
    fn start() -> Self {
        Stopwatch {
            #[cfg(not(target_arch = "wasm32"))]
            start: std::time::Instant::now(),
        }
    }

    fn secs(&self) -> f64 {
        #[cfg(not(target_arch = "wasm32"))]
        return self.start.elapsed().as_secs_f64();
        #[cfg(target_arch = "wasm32")]
        0.0
    }
}

use super::{Engine, EngineError};

/// Picks the next token from logits. Greedy here; the sampler plugs in through this trait.
pub trait Chooser {
    fn choose(&mut self, logits: &[f32]) -> u32;
}

/// Always the highest logit (the lowest id among equals).
#[derive(Clone, Copy, Debug, Default)]
pub struct Greedy;

impl Chooser for Greedy {
    fn choose(&mut self, logits: &[f32]) -> u32 {
        let mut best = 0;
        for (i, &v) in logits.iter().enumerate() {
            if v > logits[best] {
                best = i;
            }
        }
        best as u32
    }
}

/// Limits and stops.
#[derive(Clone, Debug, Default)]
pub struct GenerateOptions {
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// End-of-generation ids (ignored when `ignore_eos`).
    pub stop_ids: Vec<u32>,
    pub ignore_eos: bool,
    /// When positive, record the `top_logits` best (id, logit) pairs of every step.
    pub top_logits: usize,
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// `max_tokens` reached, or the context is full.
    Length,
    /// An end-of-generation token, or the caller stopped (stop string).
    Stop,
}

impl FinishReason {
    /// The OpenAI-style name.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Length => "length",
            FinishReason::Stop => "stop",
        }
    }
}

/// One generated step's chosen token and best logits.
#[derive(Clone, Debug, PartialEq)]
pub struct StepTop {
    pub token: u32,
    pub top: Vec<(u32, f32)>,
}

/// What a generation produced.
#[derive(Clone, Debug)]
pub struct Generation {
    /// Generated ids (an end-of-generation id that stopped the loop is not included).
    pub tokens: Vec<u32>,
    pub finish_reason: FinishReason,
    /// Per-step top logits (empty unless asked for).
    pub steps: Vec<StepTop>,
    pub prompt_tokens: usize,
    pub prompt_secs: f64,
    /// Tokens fed back through decode steps, and the time they took.
    pub decode_tokens: usize,
    pub decode_secs: f64,
}

impl Generation {
    /// Prompt processing speed.
    pub fn prompt_tokens_per_s(&self) -> f64 {
        rate(self.prompt_tokens, self.prompt_secs)
    }
    /// Generation speed (decode steps).
    pub fn gen_tokens_per_s(&self) -> f64 {
        rate(self.decode_tokens, self.decode_secs)
    }
}

fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// Generates from `prompt` on sequence `seq` (appending to what it holds). `on_token` is called
/// with each generated id; returning false stops generation (`FinishReason::Stop`).
pub fn generate(
    engine: &mut Engine,
    seq: u32,
    prompt: &[u32],
    opts: &GenerateOptions,
    chooser: &mut dyn Chooser,
    on_token: &mut dyn FnMut(u32) -> bool,
) -> Result<Generation, EngineError> {
    let t0 = Stopwatch::start();
    let mut logits = engine.prefill(seq, prompt)?;
    let mut gen = Generation {
        tokens: Vec::new(),
        finish_reason: FinishReason::Length,
        steps: Vec::new(),
        prompt_tokens: prompt.len(),
        prompt_secs: t0.secs(),
        decode_tokens: 0,
        decode_secs: 0.0,
    };
    let n_ctx = engine.seqs().n_ctx();
    for i in 0..opts.max_tokens {
        let tok = chooser.choose(&logits);
        if opts.top_logits > 0 {
            gen.steps.push(StepTop {
                token: tok,
                top: crate::backend::top_k_host(&logits, opts.top_logits),
            });
        }
        if !opts.ignore_eos && opts.stop_ids.contains(&tok) {
            gen.finish_reason = FinishReason::Stop;
            break;
        }
        gen.tokens.push(tok);
        if !on_token(tok) {
            gen.finish_reason = FinishReason::Stop;
            break;
        }
        if i + 1 == opts.max_tokens || engine.seqs().len(seq)? >= n_ctx {
            break;
        }
        let t = Stopwatch::start();
        logits = engine.decode(seq, tok)?;
        gen.decode_secs += t.secs();
        gen.decode_tokens += 1;
    }
    Ok(gen)
}
