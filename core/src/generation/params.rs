//! What a caller asks of one generation.

use std::sync::Arc;

use crate::sampler::{JsonSchema, SamplerConfig};

/// Sampling, limits and stops of one generated sequence.
#[derive(Clone, Debug)]
pub struct GenParams {
    pub sampling: SamplerConfig,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Stop strings: generation ends at the first one, which is not part of the text.
    pub stop: Vec<String>,
    /// Keep going past end-of-generation tokens.
    pub ignore_eos: bool,
    /// `Some(n)`: report each generated token's log-probability and the `n` best alternatives
    /// (of the raw model distribution, as OpenAI does).
    pub logprobs: Option<usize>,
    /// `Some`: constrained decoding, the output is one JSON value of this schema and
    /// generation stops when it is complete.
    pub json: Option<Arc<JsonSchema>>,
    /// Render control tokens (`<|im_end|>`) in the text (`weft run --special`); APIs leave
    /// them out.
    pub special_text: bool,
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams {
            sampling: SamplerConfig::default(),
            max_tokens: 256,
            stop: Vec::new(),
            ignore_eos: false,
            logprobs: None,
            json: None,
            special_text: false,
        }
    }
}
