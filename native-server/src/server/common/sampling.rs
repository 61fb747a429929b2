//! Sampling settings from three places: the request, the operator's `weft serve` flags, and
//! the built-in defaults. A value the operator configured wins over the request unless the
//! server runs with `--sampling-precedence request`; values the operator did not configure
//! always come from the request, then from the defaults.

use std::collections::BTreeMap;

use weft_core::sampler::SamplerConfig;

use crate::server::error::ApiError;

/// Sampling fields that may be set (every one optional). Used both for what a request asks
/// and for what the operator configured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SamplingFields {
    pub temperature: Option<f32>,
    pub top_k: Option<i64>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub repeat_last_n: Option<i64>,
    /// Negative means "draw a fresh seed" (Ollama's -1).
    pub seed: Option<i64>,
}

impl SamplingFields {
    /// Fills fields missing here from `other` (used for OpenAI top-level fields over
    /// `options`).
    pub fn or(self, other: &SamplingFields) -> SamplingFields {
        SamplingFields {
            temperature: self.temperature.or(other.temperature),
            top_k: self.top_k.or(other.top_k),
            top_p: self.top_p.or(other.top_p),
            min_p: self.min_p.or(other.min_p),
            repeat_penalty: self.repeat_penalty.or(other.repeat_penalty),
            presence_penalty: self.presence_penalty.or(other.presence_penalty),
            frequency_penalty: self.frequency_penalty.or(other.frequency_penalty),
            repeat_last_n: self.repeat_last_n.or(other.repeat_last_n),
            seed: self.seed.or(other.seed),
        }
    }
}

/// Who wins when both the operator and the request set a value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Precedence {
    /// Operator-configured values win (the default).
    #[default]
    Operator,
    /// Request values win.
    Request,
}

/// Combines request, operator values, `defaults` (the admin plane's settings: below both the
/// request and the operator) and the built-in defaults, and checks ranges (400 on a bad value).
pub fn resolve_with(
    request: &SamplingFields,
    operator: &SamplingFields,
    precedence: Precedence,
    defaults: &SamplingFields,
    logit_bias: BTreeMap<u32, f32>,
) -> Result<SamplerConfig, ApiError> {
    let f = match precedence {
        Precedence::Operator => operator.clone().or(request),
        Precedence::Request => request.clone().or(operator),
    }
    .or(defaults);
    let d = SamplerConfig::default();
    if let Some(k) = f.top_k {
        if k < 0 {
            return Err(ApiError::invalid(format!("top_k must be >= 0, got {k}")));
        }
    }
    let cfg = SamplerConfig {
        temperature: f.temperature.unwrap_or(d.temperature),
        top_k: f.top_k.map(|k| k as usize).unwrap_or(d.top_k),
        top_p: f.top_p.unwrap_or(d.top_p),
        min_p: f.min_p.unwrap_or(d.min_p),
        repeat_penalty: f.repeat_penalty.unwrap_or(d.repeat_penalty),
        presence_penalty: f.presence_penalty.unwrap_or(d.presence_penalty),
        frequency_penalty: f.frequency_penalty.unwrap_or(d.frequency_penalty),
        penalty_last_n: f.repeat_last_n.unwrap_or(d.penalty_last_n),
        logit_bias,
        seed: f.seed.filter(|s| *s >= 0).map(|s| s as u64),
        min_keep: d.min_keep,
    };
    cfg.validate().map_err(|e| ApiError::invalid(e.0))?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(
        request: &SamplingFields,
        operator: &SamplingFields,
        precedence: Precedence,
        bias: BTreeMap<u32, f32>,
    ) -> Result<SamplerConfig, ApiError> {
        resolve_with(
            request,
            operator,
            precedence,
            &SamplingFields::default(),
            bias,
        )
    }

    #[test]
    fn settings_defaults_sit_below_request_and_operator() {
        let defaults = SamplingFields {
            temperature: Some(0.3),
            top_k: Some(7),
            top_p: Some(0.5),
            ..Default::default()
        };
        let req = SamplingFields {
            top_k: Some(5),
            ..Default::default()
        };
        let op = SamplingFields {
            top_p: Some(0.9),
            ..Default::default()
        };
        for p in [Precedence::Operator, Precedence::Request] {
            let c = resolve_with(&req, &op, p, &defaults, BTreeMap::new()).unwrap();
            assert_eq!((c.temperature, c.top_k, c.top_p), (0.3, 5, 0.9));
        }
    }

    #[test]
    fn operator_wins_by_default_and_request_wins_when_asked() {
        let req = SamplingFields {
            temperature: Some(0.2),
            top_k: Some(5),
            ..Default::default()
        };
        let op = SamplingFields {
            temperature: Some(0.9),
            ..Default::default()
        };
        let a = resolve(&req, &op, Precedence::Operator, BTreeMap::new()).unwrap();
        assert_eq!((a.temperature, a.top_k), (0.9, 5));
        let b = resolve(&req, &op, Precedence::Request, BTreeMap::new()).unwrap();
        assert_eq!((b.temperature, b.top_k), (0.2, 5));
        let c = resolve(
            &SamplingFields::default(),
            &SamplingFields::default(),
            Precedence::Operator,
            BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(c, SamplerConfig::default());
    }

    #[test]
    fn out_of_range_is_a_400() {
        let req = SamplingFields {
            temperature: Some(-1.0),
            ..Default::default()
        };
        let e = resolve(
            &req,
            &SamplingFields::default(),
            Precedence::Operator,
            BTreeMap::new(),
        )
        .unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e.message.contains("temperature"));
    }
}
