//! A request while it holds a slot: what is left to prefill, sampling, text and stop state.

use std::time::Instant;

use super::request::{Event, Finish, Request, Summary, TokenInfo};
use crate::sampler::{self, JsonConstraint, Sampler, StopMatcher};
use crate::tokenizer::{StreamDecoder, Tokenizer};

/// A running request.
pub(crate) struct Sequence {
    pub req: Request,
    pub slot: usize,
    pub sampler: Sampler,
    /// Structured output: which tokens keep the output valid JSON.
    pub constraint: Option<JsonConstraint>,
    /// Prompt and generated ids (the penalties' history).
    pub history: Vec<u32>,
    /// Prompt tokens not yet fed to the engine.
    pub prefill_pos: usize,
    /// The last sampled token, fed in the next decode row.
    pub pending: Option<u32>,
    pub cached_tokens: usize,
    pub generated: usize,
    decoder: StreamDecoder,
    stop: StopMatcher,
    pub submitted: Instant,
    pub admitted: Instant,
    pub first_token: Option<Instant>,
    pub last_token: Option<Instant>,
}

/// What sampling one token decided.
pub(crate) enum Outcome {
    Continue,
    Finished(Finish),
}

impl Sequence {
    pub fn new(
        req: Request,
        sampler: Sampler,
        constraint: Option<JsonConstraint>,
        slot: usize,
        cached_tokens: usize,
        submitted: Instant,
    ) -> Self {
        let stop = StopMatcher::new(req.stop.clone());
        Sequence {
            history: req.prompt.clone(),
            prefill_pos: cached_tokens,
            pending: None,
            cached_tokens,
            generated: 0,
            decoder: StreamDecoder::new(false),
            stop,
            sampler,
            constraint,
            slot,
            req,
            submitted,
            admitted: Instant::now(),
            first_token: None,
            last_token: None,
        }
    }

    /// Whether prompt tokens remain to be fed.
    pub fn prefilling(&self) -> bool {
        self.prefill_pos < self.req.prompt.len()
    }

    /// Picks the next token from `logits`, reports it, and says whether to go on. `room`
    /// tells whether the slot can take another position.
    pub fn accept(&mut self, mut logits: Vec<f32>, tok: &Tokenizer, room: bool) -> Outcome {
        // Log-probabilities come from the raw distribution, before penalties and filters
        // (the sampler edits `logits` in place).
        let raw = self
            .req
            .logprobs
            .map(|n| (logits.clone(), sampler::top_logprobs(&logits, n)));
        let id = match self.constraint.as_mut() {
            None => self.sampler.sample(&mut logits, &self.history),
            Some(c) => {
                let picked =
                    self.sampler
                        .sample_constrained(&mut logits, &self.history, &mut |id| c.allows(id));
                match picked {
                    Some(id) => {
                        c.advance(id);
                        id
                    }
                    // No token can continue the value (cannot happen with a vocabulary that
                    // has the ASCII bytes): end here rather than emit invalid text.
                    None => return Outcome::Finished(Finish::Stop),
                }
            }
        };
        let now = Instant::now();
        if self.first_token.is_none() {
            self.first_token = Some(now);
        }
        self.last_token = Some(now);
        if !self.req.ignore_eos && tok.is_eog(id) {
            return Outcome::Finished(Finish::Stop);
        }
        self.generated += 1;
        self.history.push(id);
        let (logprob, top) = match raw {
            Some((l, top)) => (Some(sampler::logprob(&l, id)), top),
            None => (None, Vec::new()),
        };
        let info = TokenInfo { id, logprob, top };
        let piece = self.decoder.push(tok, id);
        let step = self.stop.push(&piece);
        let stopped = step.stopped.is_some();
        if !self.req.sink.send(Event::Delta {
            text: step.text,
            tokens: vec![info],
        }) {
            return Outcome::Finished(Finish::Cancelled);
        }
        if stopped
            || self
                .constraint
                .as_ref()
                .is_some_and(JsonConstraint::is_complete)
        {
            return Outcome::Finished(Finish::Stop);
        }
        if self.generated >= self.req.max_tokens || !room {
            return Outcome::Finished(Finish::Length);
        }
        self.pending = Some(id);
        Outcome::Continue
    }

    /// Sends the held-back text (unless a stop string ended the text) and the summary.
    pub fn finish(mut self, finish: Finish) -> Finish {
        if finish != Finish::Cancelled && self.stop.stopped().is_none() {
            let tail = self.decoder.finish();
            let mut text = self.stop.push(&tail).text;
            if self.stop.stopped().is_none() {
                text.push_str(&self.stop.finish());
            }
            if !text.is_empty() {
                self.req.sink.send(Event::Delta {
                    text,
                    tokens: Vec::new(),
                });
            }
        }
        let end = Instant::now();
        let first = self.first_token.unwrap_or(end);
        let summary = Summary {
            finish,
            prompt_tokens: self.req.prompt.len(),
            cached_tokens: self.cached_tokens,
            completion_tokens: self.generated,
            queue_secs: (self.admitted - self.submitted).as_secs_f64(),
            prompt_secs: (first - self.admitted).as_secs_f64(),
            gen_secs: (end - first).as_secs_f64(),
            seed: self.sampler.seed(),
        };
        self.req.sink.send(Event::Done(summary));
        finish
    }
}
