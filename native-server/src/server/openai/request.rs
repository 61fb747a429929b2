//! From an OpenAI request's shared fields to the internal request: sampling (request, model
//! defaults, operator flags), limits, stop strings, `n`, `logit_bias`.

use std::collections::BTreeMap;

use super::types::Common;
use crate::registry::Loaded;
use crate::server::common::options::Options;
use crate::server::common::sampling::SamplingFields;
use crate::server::common::OneOrMany;
use crate::server::error::ApiError;
use crate::server::generate::GenRequest;
use crate::server::inference::Inference;
use crate::server::leased::Leased;

impl Common {
    /// Checks the fields and builds the internal request for `prompt`.
    pub fn to_request(
        &self,
        inference: &Inference,
        m: &Leased,
        prompt: Vec<u32>,
        logprobs: Option<usize>,
    ) -> Result<GenRequest, ApiError> {
        let opts = self
            .options
            .clone()
            .unwrap_or_default()
            .or(Options::of_model(m));
        let top = SamplingFields {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            repeat_last_n: None,
            seed: self.seed,
        }
        .or(&opts.sampling());
        let bias = logit_bias(m, self.logit_bias.as_ref())?;
        let sampling = inference.resolve_sampling(&top, bias)?;
        let requested = self
            .max_tokens
            .or(self.max_completion_tokens)
            .or(opts.num_predict);
        let max_tokens = inference.tokens_to_generate(prompt.len(), requested)?;
        let stop = self
            .stop
            .clone()
            .or(opts.stop)
            .map(OneOrMany::into_vec)
            .unwrap_or_default();
        if stop.len() > 16 {
            return Err(ApiError::invalid("at most 16 stop sequences are accepted"));
        }
        let n = self.n.unwrap_or(1);
        if !(1..=16).contains(&n) {
            return Err(ApiError::invalid(format!(
                "n must be between 1 and 16, got {n}"
            )));
        }
        Ok(GenRequest {
            prompt,
            sampling,
            max_tokens,
            stop,
            logprobs,
            n: n as usize,
            ignore_eos: self.ignore_eos.unwrap_or(false),
            json: None,
            media: None,
        })
    }

    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }
}

/// OpenAI `logit_bias` (token id strings → -100..100; -100 bans the token).
fn logit_bias(
    m: &Loaded,
    b: Option<&BTreeMap<String, f32>>,
) -> Result<BTreeMap<u32, f32>, ApiError> {
    let mut out = BTreeMap::new();
    for (k, &v) in b.into_iter().flatten() {
        let id: u32 = k
            .parse()
            .map_err(|_| ApiError::invalid(format!("logit_bias key {k:?} is not a token id")))?;
        if id as usize >= m.tokenizer.vocab_size() {
            return Err(ApiError::invalid(format!(
                "logit_bias token {id} is outside the vocabulary"
            )));
        }
        if !(-100.0..=100.0).contains(&v) {
            return Err(ApiError::invalid(format!(
                "logit_bias values must be in [-100, 100], got {v}"
            )));
        }
        out.insert(id, if v <= -100.0 { f32::NEG_INFINITY } else { v });
    }
    Ok(out)
}
