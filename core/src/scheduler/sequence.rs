//! A request while it holds a slot: what is left to prefill, its generation state (shared with
//! every other way of running a model: [`SequenceState`]), and its timestamps.

use std::time::Instant;

use super::request::{Event, Finish, Request, Summary};
use crate::generation::SequenceState;
use crate::tokenizer::Tokenizer;

/// A running request.
pub(crate) struct Sequence {
    pub req: Request,
    pub slot: usize,
    state: SequenceState,
    /// Tokens to put in the cache before decoding: the prompt, or after a preemption every
    /// token the sequence had cached.
    pub feed: Vec<u32>,
    /// How many of `feed` the cache holds.
    pub fed: usize,
    /// The last sampled token, fed in the next decode row.
    pub pending: Option<u32>,
    pub cached_tokens: usize,
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
        state: SequenceState,
        slot: usize,
        cached_tokens: usize,
        submitted: Instant,
    ) -> Self {
        Sequence {
            feed: req.prompt.clone(),
            fed: cached_tokens,
            pending: None,
            cached_tokens,
            state,
            slot,
            req,
            submitted,
            admitted: Instant::now(),
            first_token: None,
            last_token: None,
        }
    }

    /// Whether tokens of `feed` remain to be fed.
    pub fn prefilling(&self) -> bool {
        self.fed < self.feed.len()
    }

    /// Whether the end of `feed` gives the logits of the first generated token (false when
    /// re-feeding after a preemption: the next token is already chosen).
    pub fn feed_wants_logits(&self) -> bool {
        self.pending.is_none()
    }

    /// Its cache was taken back: `cached` (what the cache held) is fed again when it gets a
    /// slot, then decoding goes on from the token already chosen, so the client sees the same
    /// stream as without the pause.
    pub fn preempt(&mut self, cached: Vec<u32>) {
        if self.pending.is_some() {
            self.feed = cached;
        }
        self.fed = 0;
    }

    /// Tokens generated so far.
    pub fn generated(&self) -> usize {
        self.state.generated()
    }

    /// Picks the next token from `logits`, reports it, and says whether to go on. `room`
    /// tells whether the slot can take another position.
    pub fn accept(&mut self, logits: Vec<f32>, tok: &Tokenizer, room: bool) -> Outcome {
        let step = self.state.accept(logits, tok, room);
        if step.sampled.is_some() {
            let now = Instant::now();
            if self.first_token.is_none() {
                self.first_token = Some(now);
            }
            self.last_token = Some(now);
        }
        let next = step.token.as_ref().map(|t| t.id);
        if (next.is_some() || !step.text.is_empty())
            && !self.req.sink.send(Event::Delta {
                text: step.text,
                tokens: step.token.into_iter().collect(),
            })
        {
            return Outcome::Finished(Finish::Cancelled);
        }
        match (step.finish, next) {
            (Some(f), _) => Outcome::Finished(f),
            (None, Some(id)) => {
                self.pending = Some(id);
                Outcome::Continue
            }
            (None, None) => Outcome::Finished(Finish::Stop),
        }
    }

    /// Sends what text is left (none after a stop string or when cancelled) and the summary.
    pub fn finish(mut self, finish: Finish) -> Finish {
        let text = self.state.finish(finish);
        if !text.is_empty() {
            self.req.sink.send(Event::Delta {
                text,
                tokens: Vec::new(),
            });
        }
        let end = Instant::now();
        let first = self.first_token.unwrap_or(end);
        let summary = Summary {
            finish,
            prompt_tokens: self.req.prompt.len(),
            cached_tokens: self.cached_tokens,
            completion_tokens: self.state.generated(),
            queue_secs: (self.admitted - self.submitted).as_secs_f64(),
            prompt_secs: (first - self.admitted).as_secs_f64(),
            gen_secs: (end - first).as_secs_f64(),
            seed: self.state.seed(),
        };
        self.req.sink.send(Event::Done(summary));
        finish
    }
}
