//! What a client submits and what it gets back.

use std::sync::Arc;

use crate::engine::Prompt;
use crate::generation::GenParams;
pub use crate::generation::{Finish, TokenInfo};
use crate::sampler::{JsonSchema, SamplerConfig};

/// One generation request: prompt ids, sampling, limits and where events go.
pub struct Request {
    /// Prompt token ids (already templated and tokenized); must not be empty. With `media`,
    /// that prompt's [`Prompt::cache_keys`] (one per position: what prefix reuse compares).
    pub prompt: Vec<u32>,
    /// A prompt holding embedding rows (images) as well as tokens; `None` for text.
    pub media: Option<Arc<MediaPrompt>>,
    pub sampling: SamplerConfig,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Stop strings: generation ends at the first one, which is not part of the output.
    pub stop: Vec<String>,
    /// Keep going past end-of-generation tokens.
    pub ignore_eos: bool,
    /// `Some(n)`: report each generated token's log-probability and the `n` best alternatives
    /// (of the raw model distribution, as OpenAI does).
    pub logprobs: Option<usize>,
    /// `Some`: constrained decoding, the output is one JSON value of this schema and
    /// generation stops when it is complete.
    pub json: Option<Arc<JsonSchema>>,
    /// Where events go.
    pub sink: Box<dyn EventSink>,
}

/// A prompt with embedding rows, and the id its rows stand as where an id is needed.
#[derive(Clone, Debug, PartialEq)]
pub struct MediaPrompt {
    pub prompt: Prompt,
    /// The id of each embedding row in the penalties' history.
    pub placeholder: u32,
}

impl MediaPrompt {
    /// The keys a [`Request`] carries as its `prompt`.
    pub fn keys(&self) -> Vec<u32> {
        self.prompt.cache_keys()
    }

    /// The token id of every position (`placeholder` at rows).
    pub fn ids(&self) -> Vec<u32> {
        self.prompt.ids(self.placeholder)
    }
}

impl Request {
    /// The generation settings of this request.
    pub fn params(&self) -> GenParams {
        GenParams {
            sampling: self.sampling.clone(),
            max_tokens: self.max_tokens,
            stop: self.stop.clone(),
            ignore_eos: self.ignore_eos,
            logprobs: self.logprobs,
            json: self.json.clone(),
            special_text: false,
        }
    }
}

/// Receives a request's events, in order. Called from the scheduler thread: must not block.
pub trait EventSink: Send {
    /// Delivers an event; false means the receiver is gone (the request is cancelled).
    fn send(&mut self, event: Event) -> bool;
    /// Whether the receiver is gone, checked every step even when no event is due.
    fn is_closed(&self) -> bool {
        false
    }
}

/// A request's progress.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The request waits for a slot: its place in the queue (1: next) and how many wait in
    /// all. Sent when a waiting request's place changes; never for one that got a slot at once.
    Queued { position: usize, pending: usize },
    /// The request got a slot: its prompt length and how much of it came from the cache.
    Started {
        prompt_tokens: usize,
        cached_tokens: usize,
    },
    /// Newly generated tokens and the text now safe to show (text can lag behind tokens while
    /// a stop string or a UTF-8 character is incomplete; the last `Delta` flushes it).
    Delta {
        text: String,
        tokens: Vec<TokenInfo>,
    },
    /// The request ended normally or was cancelled. Always the last event.
    Done(Summary),
    /// The request failed (engine error, shutdown). Always the last event.
    Failed(Failure),
}

/// Why a request failed, so each API can answer with the right status.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The server stopped taking work before the request could run.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// The request cannot run as given (empty or too long prompt, ids outside the
    /// vocabulary, sampling settings out of range): the client's to fix.
    #[error("{0}")]
    Rejected(String),
    /// The engine failed while running the request: the server's fault.
    #[error("inference failed: {0}")]
    Engine(String),
    /// A filter outside the engine (the server's moderation rules) stopped the output.
    #[error("{0}")]
    Blocked(String),
}

/// Figures of a finished request.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub finish: Finish,
    pub prompt_tokens: usize,
    /// Prompt tokens served from the cache (not evaluated again).
    pub cached_tokens: usize,
    pub completion_tokens: usize,
    /// Seconds waiting for a slot.
    pub queue_secs: f64,
    /// Seconds from getting a slot to the first generated token (prompt evaluation).
    pub prompt_secs: f64,
    /// Seconds from the first generated token to the end.
    pub gen_secs: f64,
    /// The seed the sampler used (drawn when the request gave none).
    pub seed: u64,
}
