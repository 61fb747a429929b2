//! [`Session`]: one engine sequence generating by itself, request after request, reusing the
//! prefix its cache holds (an interactive chat's earlier turns are not evaluated again).

use std::future::Future;

use super::clock::now_secs;
use super::{Finish, GenParams, SequenceState, Step};
use crate::engine::{Engine, EngineError, Prompt};
use crate::loaded::LoadedModel;
use crate::scheduler::{prompt_problem, slots};

/// One generated step's chosen token and the best raw logits it was chosen from.
#[derive(Clone, Debug, PartialEq)]
pub struct StepTop {
    pub token: u32,
    pub top: Vec<(u32, f32)>,
}

/// What one generation produced.
#[derive(Clone, Debug)]
pub struct Generated {
    /// Generated ids (an end-of-generation id that ended the sequence is not included).
    pub tokens: Vec<u32>,
    /// The text, as streamed (cut before a stop string).
    pub text: String,
    pub finish: Finish,
    /// Per-step chosen token and top raw logits (empty unless [`Session::top_logits`] is set).
    pub steps: Vec<StepTop>,
    pub prompt_tokens: usize,
    /// Prompt tokens the cache already held (not evaluated again).
    pub cached_tokens: usize,
    /// Seconds evaluating the prompt.
    pub prompt_secs: f64,
    /// Tokens fed back through decode steps, and the time they took.
    pub decode_tokens: usize,
    pub decode_secs: f64,
    /// The sampler's seed.
    pub seed: u64,
}

impl Generated {
    /// Prompt processing speed (tokens evaluated per second).
    pub fn prompt_tokens_per_s(&self) -> f64 {
        rate(self.prompt_tokens - self.cached_tokens, self.prompt_secs)
    }

    /// Generation speed (decode steps per second).
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

/// A sequence slot of a [`LoadedModel`]'s engine and the ids its cache holds.
pub struct Session {
    seq: u32,
    cached: Vec<u32>,
    /// When positive, every step records its `top_logits` best raw (id, logit) pairs in
    /// [`Generated::steps`] (`weft run --logits`).
    pub top_logits: usize,
}

/// One generation in progress.
struct Run {
    state: SequenceState,
    out: Generated,
}

impl Session {
    /// Takes a free sequence slot of `engine`.
    pub fn new(engine: &mut Engine) -> Result<Session, EngineError> {
        Ok(Session {
            seq: engine.new_sequence()?,
            cached: Vec::new(),
            top_logits: 0,
        })
    }

    /// The engine sequence this session uses.
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// Forgets the cached ids (the next generation evaluates its whole prompt).
    pub fn reset(&mut self, engine: &mut Engine) -> Result<(), EngineError> {
        self.cached.clear();
        engine.truncate(self.seq, 0)
    }

    /// Generates after `prompt`, calling `on_step` after every step (its text is what to
    /// stream; returning false stops: [`Finish::Cancelled`]).
    pub fn generate(
        &mut self,
        model: &mut LoadedModel,
        prompt: &[u32],
        params: &GenParams,
        on_step: &mut dyn FnMut(&Step) -> bool,
    ) -> Result<Generated, EngineError> {
        let (mut run, reuse) = self.begin(model, prompt, params)?;
        let t = now_secs();
        let logits = model.engine.prefill(self.seq, &prompt[reuse..]);
        let logits = self.check(model, logits)?;
        run.out.prompt_secs = now_secs() - t;
        self.decode_loop(model, run, logits, on_step)
    }

    /// [`generate`](Self::generate) after a prompt that may hold embedding rows (an image's
    /// projector output). Prefix reuse compares [`Prompt::cache_keys`], so a cached image is
    /// reused only for the same embedding values, and never from inside it. The penalties'
    /// history sees `placeholder` at embedding rows (the model's image token, say).
    pub fn generate_prompt(
        &mut self,
        model: &mut LoadedModel,
        prompt: &Prompt,
        placeholder: u32,
        params: &GenParams,
        on_step: &mut dyn FnMut(&Step) -> bool,
    ) -> Result<Generated, EngineError> {
        let keys = prompt.cache_keys();
        let ids = prompt.ids(placeholder);
        let (mut run, reuse) =
            self.begin_keyed(model, &ids, &keys, |r| prompt.clamp_reuse(r), params)?;
        let t = now_secs();
        let logits = model.engine.prefill_prompt(self.seq, &prompt.from(reuse));
        let logits = self.check(model, logits)?;
        run.out.prompt_secs = now_secs() - t;
        self.decode_loop(model, run, logits, on_step)
    }

    /// [`generate`](Self::generate) with every step's readback awaited (the browser, where
    /// WebGPU cannot block), and `on_step`'s future awaited after each step (to let the event
    /// loop run and see a stop request).
    pub async fn generate_async<F, Fut>(
        &mut self,
        model: &mut LoadedModel,
        prompt: &[u32],
        params: &GenParams,
        on_step: F,
    ) -> Result<Generated, EngineError>
    where
        F: FnMut(&Step) -> Fut,
        Fut: Future<Output = bool>,
    {
        let (mut run, reuse) = self.begin(model, prompt, params)?;
        let t = now_secs();
        let logits = model.engine.prefill_async(self.seq, &prompt[reuse..]).await;
        let logits = self.check(model, logits)?;
        run.out.prompt_secs = now_secs() - t;
        self.decode_loop_async(model, run, logits, on_step).await
    }

    /// [`generate_prompt`](Self::generate_prompt) with every step's readback awaited and
    /// `on_step`'s future awaited after each step, as [`generate_async`](Self::generate_async).
    pub async fn generate_prompt_async<F, Fut>(
        &mut self,
        model: &mut LoadedModel,
        prompt: &Prompt,
        placeholder: u32,
        params: &GenParams,
        on_step: F,
    ) -> Result<Generated, EngineError>
    where
        F: FnMut(&Step) -> Fut,
        Fut: Future<Output = bool>,
    {
        let keys = prompt.cache_keys();
        let ids = prompt.ids(placeholder);
        let (mut run, reuse) =
            self.begin_keyed(model, &ids, &keys, |r| prompt.clamp_reuse(r), params)?;
        let t = now_secs();
        let logits = model
            .engine
            .prefill_prompt_async(self.seq, &prompt.from(reuse))
            .await;
        let logits = self.check(model, logits)?;
        run.out.prompt_secs = now_secs() - t;
        self.decode_loop_async(model, run, logits, on_step).await
    }

    /// [`decode_loop`](Self::decode_loop) with readbacks and `on_step` awaited.
    async fn decode_loop_async<F, Fut>(
        &mut self,
        model: &mut LoadedModel,
        mut run: Run,
        mut logits: Vec<f32>,
        mut on_step: F,
    ) -> Result<Generated, EngineError>
    where
        F: FnMut(&Step) -> Fut,
        Fut: Future<Output = bool>,
    {
        loop {
            let step = run.step(logits, self, model);
            let go_on = on_step(&step).await;
            let Some(next) = run.next(&step, go_on) else {
                break;
            };
            let t = now_secs();
            let l = model.engine.decode_async(self.seq, next).await;
            logits = self.fed(model, l, next, &mut run, t)?;
        }
        Ok(run.out)
    }

    /// Decodes after a prefill until the run ends or `on_step` says stop.
    fn decode_loop(
        &mut self,
        model: &mut LoadedModel,
        mut run: Run,
        mut logits: Vec<f32>,
        on_step: &mut dyn FnMut(&Step) -> bool,
    ) -> Result<Generated, EngineError> {
        loop {
            let step = run.step(logits, self, model);
            let go_on = on_step(&step);
            let Some(next) = run.next(&step, go_on) else {
                break;
            };
            let t = now_secs();
            let l = model.engine.decode(self.seq, next);
            logits = self.fed(model, l, next, &mut run, t)?;
        }
        Ok(run.out)
    }

    /// Checks the prompt, keeps the cached prefix it shares (by the scheduler's rule) and
    /// starts the sequence state. Returns the run and how many prompt ids are reused.
    fn begin(
        &mut self,
        model: &mut LoadedModel,
        prompt: &[u32],
        params: &GenParams,
    ) -> Result<(Run, usize), EngineError> {
        self.begin_keyed(model, prompt, prompt, |r| r, params)
    }

    /// [`begin`](Self::begin) with prefix reuse comparing `keys` (one per prompt position)
    /// and its length passed through `clamp`.
    fn begin_keyed(
        &mut self,
        model: &mut LoadedModel,
        prompt: &[u32],
        keys: &[u32],
        clamp: impl FnOnce(usize) -> usize,
        params: &GenParams,
    ) -> Result<(Run, usize), EngineError> {
        let engine = &model.engine;
        if let Some(msg) = prompt_problem(
            prompt,
            engine.config().kv.n_ctx,
            engine.model_info().n_vocab,
        ) {
            return Err(EngineError::Invalid(msg));
        }
        let state = SequenceState::new(params, prompt, || model.token_texts())
            .map_err(|e| EngineError::Invalid(e.to_string()))?;
        let reuse = clamp(slots::reusable(
            &self.cached,
            keys,
            model.engine.rewind_limit(),
        ));
        if let Err(e) = model.engine.truncate(self.seq, reuse) {
            self.cached.clear();
            return Err(e);
        }
        self.cached.truncate(reuse);
        let seed = state.seed();
        let run = Run {
            state,
            out: Generated {
                tokens: Vec::new(),
                text: String::new(),
                finish: Finish::Length,
                steps: Vec::new(),
                prompt_tokens: prompt.len(),
                cached_tokens: reuse,
                prompt_secs: 0.0,
                decode_tokens: 0,
                decode_secs: 0.0,
                seed,
            },
        };
        self.cached.extend_from_slice(&keys[reuse..]);
        Ok((run, reuse))
    }

    /// An engine result; on failure the cache's state is unknown, so it is forgotten.
    fn check<T>(
        &mut self,
        model: &mut LoadedModel,
        r: Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        if r.is_err() {
            let _ = self.reset(&mut model.engine);
        }
        r
    }

    /// Records a decode step of `token` that started at `t`.
    fn fed(
        &mut self,
        model: &mut LoadedModel,
        logits: Result<Vec<f32>, EngineError>,
        token: u32,
        run: &mut Run,
        t: f64,
    ) -> Result<Vec<f32>, EngineError> {
        let logits = self.check(model, logits)?;
        run.out.decode_secs += now_secs() - t;
        run.out.decode_tokens += 1;
        self.cached.push(token);
        Ok(logits)
    }
}

impl Run {
    /// Picks the next token from `logits` and records the step.
    fn step(&mut self, logits: Vec<f32>, session: &Session, model: &LoadedModel) -> Step {
        let top = (session.top_logits > 0)
            .then(|| crate::backend::top_k_host(&logits, session.top_logits));
        let room = session.cached.len() < model.engine.config().kv.n_ctx;
        let step = self.state.accept(logits, &model.tokenizer, room);
        if let (Some(top), Some(token)) = (top, step.sampled) {
            self.out.steps.push(StepTop { token, top });
        }
        if let Some(t) = &step.token {
            self.out.tokens.push(t.id);
        }
        self.out.text.push_str(&step.text);
        step
    }

    /// The token to feed next, or None when the sequence ended (`go_on` false stops it).
    fn next(&mut self, step: &Step, go_on: bool) -> Option<u32> {
        if let Some(f) = step.finish {
            self.out.finish = f;
            return None;
        }
        if !go_on {
            self.out.finish = Finish::Cancelled;
            return None;
        }
        step.token.as_ref().map(|t| t.id)
    }
}
