//! [`SequenceState`]: from a step's logits to the next token, its text, and whether to stop.

use std::sync::Arc;

use super::{Finish, GenParams, TokenInfo};
use crate::sampler::{self, JsonConstraint, Sampler, SamplerError, StopMatcher, TokenTexts};
use crate::tokenizer::{StreamDecoder, Tokenizer};

/// The generation state of one sequence: sampler and penalty history, JSON constraint, stream
/// decoder, stop strings and limits.
pub struct SequenceState {
    sampler: Sampler,
    /// Structured output: which tokens keep the output valid JSON.
    constraint: Option<JsonConstraint>,
    /// Prompt and generated ids (the penalties' history).
    history: Vec<u32>,
    generated: usize,
    max_tokens: usize,
    ignore_eos: bool,
    logprobs: Option<usize>,
    decoder: StreamDecoder,
    stop: StopMatcher,
}

/// What one step decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Step {
    /// The id the sampler chose, an end-of-generation id included (None when the JSON
    /// constraint allowed no token, or `max_tokens` is 0).
    pub sampled: Option<u32>,
    /// The generated token, when it is part of the output (an end-of-generation id that ends
    /// the sequence is not).
    pub token: Option<TokenInfo>,
    /// Text now safe to show: it lags behind the tokens while a stop string or a UTF-8
    /// character may be incomplete; the step that finishes the sequence includes the rest.
    pub text: String,
    /// Set when the sequence ends with this step.
    pub finish: Option<Finish>,
}

impl SequenceState {
    /// A sequence after `prompt`. `texts` gives the model's token texts; it is called only
    /// when `params.json` asks for constrained decoding (build it once per model and share).
    pub fn new(
        params: &GenParams,
        prompt: &[u32],
        texts: impl FnOnce() -> Arc<TokenTexts>,
    ) -> Result<Self, SamplerError> {
        let sampler = Sampler::new(params.sampling.clone())?;
        let constraint = params
            .json
            .clone()
            .map(|schema| JsonConstraint::new(schema, texts()));
        Ok(SequenceState {
            sampler,
            constraint,
            history: prompt.to_vec(),
            generated: 0,
            max_tokens: params.max_tokens,
            ignore_eos: params.ignore_eos,
            logprobs: params.logprobs,
            decoder: StreamDecoder::new(params.special_text),
            stop: StopMatcher::new(params.stop.iter().cloned()),
        })
    }

    /// Tokens generated so far.
    pub fn generated(&self) -> usize {
        self.generated
    }

    /// The seed the sampler uses (drawn when the settings gave none).
    pub fn seed(&self) -> u64 {
        self.sampler.seed()
    }

    /// Picks the next token from `logits` and says what it means. `room` tells whether the
    /// sequence's cache can take another position (after this token there is no next step
    /// when it cannot). A step with [`finish`](Step::finish) set already holds all the
    /// remaining text.
    pub fn accept(&mut self, mut logits: Vec<f32>, tok: &Tokenizer, room: bool) -> Step {
        if self.generated >= self.max_tokens {
            return self.end(Step::default(), Finish::Length);
        }
        // Log-probabilities come from the raw distribution, before penalties and filters
        // (the sampler edits `logits` in place).
        let raw = self
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
                    None => return self.end(Step::default(), Finish::Stop),
                }
            }
        };
        let mut step = Step {
            sampled: Some(id),
            ..Step::default()
        };
        if !self.ignore_eos && tok.is_eog(id) {
            return self.end(step, Finish::Stop);
        }
        self.generated += 1;
        self.history.push(id);
        let (logprob, top) = match raw {
            Some((l, top)) => (Some(sampler::logprob(&l, id)), top),
            None => (None, Vec::new()),
        };
        step.token = Some(TokenInfo { id, logprob, top });
        let piece = self.decoder.push(tok, id);
        let released = self.stop.push(&piece);
        step.text = released.text;
        if released.stopped.is_some()
            || self
                .constraint
                .as_ref()
                .is_some_and(JsonConstraint::is_complete)
        {
            return self.end(step, Finish::Stop);
        }
        if self.generated >= self.max_tokens || !room {
            return self.end(step, Finish::Length);
        }
        step
    }

    /// Ends the sequence with `finish` outside [`accept`](Self::accept) (the caller stopped
    /// it): returns the text still held back, or nothing when cancelled.
    pub fn finish(&mut self, finish: Finish) -> String {
        if finish == Finish::Cancelled || self.stop.stopped().is_some() {
            return String::new();
        }
        let tail = self.decoder.finish();
        let mut text = self.stop.push(&tail).text;
        if self.stop.stopped().is_none() {
            text.push_str(&self.stop.finish());
        }
        text
    }

    fn end(&mut self, mut step: Step, finish: Finish) -> Step {
        let rest = self.finish(finish);
        step.text.push_str(&rest);
        step.finish = Some(finish);
        step
    }
}
