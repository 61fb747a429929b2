//! Generating one sequence: the per-token logic every way of running a model shares.
//!
//! [`SequenceState`] is what happens after each step's logits: sampling (penalties, bias,
//! filters, seed), the JSON-schema constraint, the end-of-generation check, streamed text
//! decoding, stop strings, and the `max_tokens` / context limits. The server's continuous
//! batching [`Scheduler`](crate::scheduler::Scheduler) runs one per request; [`Session`] runs
//! one sequence on an engine by itself (`weft run`, the browser build), synchronously or with
//! the GPU readback awaited. So a prompt with the same settings gives the same tokens, text and
//! finish reason from the CLI, the server and the browser.

mod clock;
mod params;
mod sequence;
mod session;

pub use clock::now_secs;
pub use params::GenParams;
pub use sequence::{SequenceState, Step};
pub use session::{Generated, Session, StepTop};

/// One generated token.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenInfo {
    pub id: u32,
    /// ln p of this token under the model's raw distribution (when logprobs were asked).
    pub logprob: Option<f32>,
    /// The best alternatives as (id, ln p), most likely first (when logprobs were asked).
    pub top: Vec<(u32, f32)>,
}

/// Why a sequence ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// End-of-generation token, stop string, or a complete JSON value.
    Stop,
    /// `max_tokens` reached or the context is full.
    Length,
    /// The client went away, the caller stopped it, or the server is shutting down.
    Cancelled,
}

impl Finish {
    /// The OpenAI / Ollama name.
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
            Finish::Cancelled => "cancelled",
        }
    }
}
