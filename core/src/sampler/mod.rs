//! Token sampling: the sampler chain, stop strings, log-probabilities. (Which tokens end
//! generation is the tokenizer's: [`Tokenizer::eog_ids`](crate::tokenizer::Tokenizer::eog_ids).)
//!
//! The chain follows llama.cpp's common sampler: repetition / presence / frequency penalties →
//! logit bias → top-k → top-p → min-p → temperature → a seeded draw (temperature 0 is greedy).
//! (Recent llama.cpp adds the logit bias before the penalties; the two orders differ only for a
//! token that is both biased and penalised.) Randomness comes from a per-sampler xoshiro256**
//! stream and a platform-independent `exp`, so a seed reproduces the same tokens natively and
//! in wasm.

mod automaton;
mod chain;
mod charset;
mod config;
mod constrain;
mod formats;
mod json_acceptor;
mod json_schema;
mod logprobs;
mod numbers;
mod penalties;
mod regex;
mod rng;
#[cfg(test)]
mod schema_walks;
mod stop;
mod string_rule;

use thiserror::Error;

pub use chain::{argmax, Candidate, Sampler};
pub use config::SamplerConfig;
pub use constrain::{best_allowed, JsonConstraint, TokenTexts};
pub use json_acceptor::JsonAcceptor;
pub use json_schema::JsonSchema;
pub use logprobs::{logprob, top_logprobs};
pub use penalties::{apply_bias, apply_penalties};
pub use rng::Rng;
pub use stop::{StopMatcher, StopStep};

/// Invalid sampler settings; the message names the field.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("invalid sampler settings: {0}")]
pub struct SamplerError(pub String);
