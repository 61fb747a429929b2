//! Sampling settings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::SamplerError;

/// Settings of the sampler chain. Every field has a default (llama.cpp's), so any subset can
/// be given in JSON. A filter is off at its neutral value: `top_k` 0, `top_p` 1, `min_p` 0,
/// `repeat_penalty` 1, `presence_penalty` / `frequency_penalty` 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplerConfig {
    /// 0 means greedy (argmax after penalties and bias).
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub min_p: f32,
    /// Divides positive logits and multiplies negative ones of tokens seen in the window.
    pub repeat_penalty: f32,
    /// Subtracted once from the logit of every token seen in the window (OpenAI's definition).
    pub presence_penalty: f32,
    /// Subtracted once per occurrence in the window (OpenAI's definition).
    pub frequency_penalty: f32,
    /// How many of the most recent tokens the penalties look at; -1 means all of them.
    pub penalty_last_n: i64,
    /// Added to the logits of the given token ids (`f32::NEG_INFINITY` bans a token).
    pub logit_bias: BTreeMap<u32, f32>,
    /// Same seed, same logits, same history ⇒ same token. None draws a fresh seed.
    pub seed: Option<u64>,
    /// top-k / top-p / min-p never keep fewer candidates than this.
    pub min_keep: usize,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            penalty_last_n: 64,
            logit_bias: BTreeMap::new(),
            seed: None,
            min_keep: 1,
        }
    }
}

impl SamplerConfig {
    /// Plain argmax: temperature 0, no penalties, no bias.
    pub fn greedy() -> Self {
        SamplerConfig {
            temperature: 0.0,
            ..Default::default()
        }
    }

    /// Sampling from the full distribution at temperature 1 with every filter off.
    pub fn unfiltered(seed: u64) -> Self {
        SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            seed: Some(seed),
            ..Default::default()
        }
    }

    /// Checks ranges; the message names the field and the accepted range.
    pub fn validate(&self) -> Result<(), SamplerError> {
        let bad = |field: &str, want: &str, got: f32| {
            Err(SamplerError(format!("{field} must be {want}, got {got}")))
        };
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return bad("temperature", "a finite number >= 0", self.temperature);
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", "in (0, 1]", self.top_p);
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad("min_p", "in [0, 1]", self.min_p);
        }
        if !(self.repeat_penalty > 0.0 && self.repeat_penalty.is_finite()) {
            return bad("repeat_penalty", "a finite number > 0", self.repeat_penalty);
        }
        if !self.presence_penalty.is_finite() {
            return bad("presence_penalty", "finite", self.presence_penalty);
        }
        if !self.frequency_penalty.is_finite() {
            return bad("frequency_penalty", "finite", self.frequency_penalty);
        }
        if self.penalty_last_n < -1 {
            return Err(SamplerError(format!(
                "penalty_last_n must be -1 (all) or >= 0, got {}",
                self.penalty_last_n
            )));
        }
        if let Some((id, b)) = self.logit_bias.iter().find(|(_, b)| b.is_nan()) {
            return Err(SamplerError(format!("logit_bias for token {id} is {b}")));
        }
        Ok(())
    }
}
