//! Pieces every OpenAI response is made of: ids and fingerprint, usage over all choices, the
//! end of a streamed choice, and the error frame that ends a failed stream.

use weft_core::scheduler::{Failure, Summary};

use super::types::{PromptTokensDetails, Usage};
use crate::server::error::ApiError;
use crate::server::openai::OpenAiState;
use crate::server::stream::json_frame;

/// An identifier of the server build and backend (OpenAI `system_fingerprint`).
pub fn fingerprint(st: &OpenAiState) -> String {
    format!("weft-{}-{}", env!("CARGO_PKG_VERSION"), st.cfg.backend)
}

/// Fields every chunk and response of one request repeats.
#[derive(Clone, Debug)]
pub struct Head {
    pub id: String,
    pub created: u64,
    pub model: String,
    pub fingerprint: String,
}

impl Head {
    pub fn new(st: &OpenAiState, prefix: &str, model: &str) -> Head {
        Head {
            id: format!("{prefix}-{}", crate::server::common::ids::unique()),
            created: crate::server::clock::now_unix(),
            model: model.to_string(),
            fingerprint: fingerprint(st),
        }
    }
}

/// `usage` over all choices (they share the prompt).
pub fn usage(sums: &[&Summary]) -> Usage {
    let prompt = sums.first().map(|s| s.prompt_tokens).unwrap_or(0);
    let cached = sums.first().map(|s| s.cached_tokens).unwrap_or(0);
    let completion: usize = sums.iter().map(|s| s.completion_tokens).sum();
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        prompt_tokens_details: PromptTokensDetails {
            cached_tokens: cached,
        },
    }
}

/// Records that choice `i` ended; once every choice has, the usage of all (the stream is then
/// over).
pub fn end_choice(sums: &mut [Option<Summary>], i: usize, s: Summary) -> Option<Usage> {
    sums[i] = Some(s);
    if !sums.iter().all(Option::is_some) {
        return None;
    }
    let all: Vec<&Summary> = sums.iter().flatten().collect();
    Some(usage(&all))
}

/// The OpenAI-shaped error frame that ends a stream whose generation failed.
pub fn stream_error(f: Failure) -> String {
    json_frame(&ApiError::from(f).openai_body())
}
