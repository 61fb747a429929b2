//! Ollama's `options` object: generation settings accepted on `/api` and, as an extension, on
//! `/v1` (where top-level OpenAI fields win over them), and stored as a model name's defaults
//! (`/api/create` `parameters`).

use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::sampling::SamplingFields;
use super::OneOrMany;
use crate::server::leased::Leased;

/// Ollama `options`.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
pub struct Options {
    /// Most tokens to generate (-1: until the context is full).
    pub num_predict: Option<i64>,
    /// Validated; the context is fixed when the server starts (`--ctx`).
    pub num_ctx: Option<i64>,
    pub temperature: Option<f32>,
    pub top_k: Option<i64>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub repeat_last_n: Option<i64>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    /// -1 draws a fresh seed.
    pub seed: Option<i64>,
    pub stop: Option<OneOrMany>,
}

impl Options {
    /// The default options a model name carries (`/api/create` `parameters`).
    pub fn of_model(m: &Leased) -> Options {
        serde_json::from_value(Value::Object(m.overrides.parameters.clone())).unwrap_or_default()
    }

    /// `self`, with `defaults` filling the fields it leaves unset.
    pub fn or(self, d: Options) -> Options {
        Options {
            num_predict: self.num_predict.or(d.num_predict),
            num_ctx: self.num_ctx.or(d.num_ctx),
            temperature: self.temperature.or(d.temperature),
            top_k: self.top_k.or(d.top_k),
            top_p: self.top_p.or(d.top_p),
            min_p: self.min_p.or(d.min_p),
            repeat_penalty: self.repeat_penalty.or(d.repeat_penalty),
            repeat_last_n: self.repeat_last_n.or(d.repeat_last_n),
            presence_penalty: self.presence_penalty.or(d.presence_penalty),
            frequency_penalty: self.frequency_penalty.or(d.frequency_penalty),
            seed: self.seed.or(d.seed),
            stop: self.stop.or(d.stop),
        }
    }

    pub fn sampling(&self) -> SamplingFields {
        SamplingFields {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            repeat_last_n: self.repeat_last_n,
            seed: self.seed,
        }
    }
}
