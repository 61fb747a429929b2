//! What running a model for a request needs, in one service below every surface: the model
//! registry, the checks of who may run what (`admission`, with the database and the
//! token buckets), and the generation limits and sampling defaults (flags, then the admin
//! settings). Surfaces reach it through the server state (`FromRef`); it knows nothing of
//! them, so the inference path (leasing, prompt building, generation) draws no arrow back up
//! to the server state.

pub mod admission;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use serde_json::Value;
use weft_core::sampler::SamplerConfig;
use weft_storage::Storage;

use crate::registry::{KeepAlive, Registry};
use crate::server::auth::context::RequestCtx;
use crate::server::auth::usage::Usage;
use crate::server::common::sampling::{resolve_with, Precedence, SamplingFields};
use crate::server::error::ApiError;
use crate::server::leased::Leased;

pub struct Inference {
    pub registry: Arc<Registry>,
    /// Tenants, A/B tests and adapters, read by the admission checks.
    pub(super) storage: Storage,
    /// Tokens-per-minute buckets of the keys.
    pub(super) usage: Arc<Usage>,
    /// The context every model is loaded with (`--ctx`).
    pub n_ctx: usize,
    /// `--max-tokens`: the default and cap of generated tokens.
    max_tokens_flag: usize,
    /// The `max_tokens` setting; 0: the flag.
    max_tokens_setting: AtomicUsize,
    /// The operator's sampling flags and how they rank against a request's own values.
    sampling: SamplingFields,
    precedence: Precedence,
    /// Sampling defaults from the admin settings (below request and operator values).
    defaults: RwLock<SamplingFields>,
    /// Per-request bounds on images.
    pub images: super::common::images::ImageLimits,
}

impl Inference {
    pub fn new(
        registry: Arc<Registry>,
        storage: Storage,
        usage: Arc<Usage>,
        n_ctx: usize,
        max_tokens: usize,
        sampling: SamplingFields,
        precedence: Precedence,
    ) -> Self {
        Inference {
            registry,
            storage,
            usage,
            n_ctx,
            max_tokens_flag: max_tokens,
            max_tokens_setting: AtomicUsize::new(0),
            sampling,
            precedence,
            defaults: RwLock::new(SamplingFields::default()),
            images: Default::default(),
        }
    }

    /// A lease on the named model (the default one when `None`) for the request `ctx`,
    /// loading it if needed, once the request may run on it; `keep_alive` is the request's
    /// Ollama field, if it has one.
    pub async fn lease(
        &self,
        ctx: &RequestCtx,
        model: Option<&str>,
        keep_alive: Option<&Value>,
    ) -> Result<Leased, ApiError> {
        let ka = keep_alive
            .filter(|v| !v.is_null())
            .map(KeepAlive::from_json)
            .transpose()?;
        let model = admission::admit(self, ctx, model).await?;
        let lease = self.registry.acquire(model.as_deref(), ka).await?;
        Ok(Leased::new(lease, ctx.clone()))
    }

    /// Like [`lease`](Self::lease) for APIs whose `model` field is required.
    pub async fn lease_named(
        &self,
        ctx: &RequestCtx,
        model: Option<&str>,
        keep_alive: Option<&Value>,
    ) -> Result<Leased, ApiError> {
        match model {
            Some(m) if !m.trim().is_empty() => self.lease(ctx, Some(m), keep_alive).await,
            _ => Err(ApiError::invalid("model is required")),
        }
    }

    /// A request's sampling: its own values, the operator's flags (by `--sampling-precedence`),
    /// then the admin settings' defaults, then the built-in ones.
    pub fn resolve_sampling(
        &self,
        request: &SamplingFields,
        logit_bias: std::collections::BTreeMap<u32, f32>,
    ) -> Result<SamplerConfig, ApiError> {
        let defaults = self
            .defaults
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        resolve_with(
            request,
            &self.sampling,
            self.precedence,
            &defaults,
            logit_bias,
        )
    }

    /// Applies the admin settings' sampling defaults.
    pub fn set_defaults(&self, sampling: SamplingFields) {
        *self.defaults.write().unwrap_or_else(|p| p.into_inner()) = sampling;
    }

    /// The default and cap of generated tokens per request.
    pub fn max_tokens(&self) -> usize {
        match self.max_tokens_setting.load(Ordering::Relaxed) {
            0 => self.max_tokens_flag,
            n => n,
        }
    }

    /// Applies the `max_tokens` setting (`None`: back to `--max-tokens`).
    pub fn set_max_tokens(&self, n: Option<usize>) {
        self.max_tokens_setting
            .store(n.unwrap_or(0), Ordering::Relaxed);
    }

    /// Tokens to generate: the request's value (or the server default), capped by
    /// `--max-tokens` and by the room the context leaves; a prompt that does not fit is a 400.
    pub fn tokens_to_generate(
        &self,
        prompt_len: usize,
        requested: Option<i64>,
    ) -> Result<usize, ApiError> {
        let n_ctx = self.n_ctx;
        if prompt_len == 0 {
            return Err(ApiError::invalid("the prompt is empty"));
        }
        if prompt_len >= n_ctx {
            return Err(ApiError::invalid_code(
                "context_length_exceeded",
                format!("the prompt has {prompt_len} tokens but the context holds {n_ctx} (start the server with a larger --ctx or shorten the prompt)"),
            ));
        }
        let want = match requested {
            Some(n) if n < 0 => {
                return Err(ApiError::invalid(format!(
                    "max_tokens must be >= 0, got {n}"
                )))
            }
            Some(n) => (n as u64).min(self.max_tokens() as u64) as usize,
            None => self.max_tokens(),
        };
        Ok(want.min(n_ctx - prompt_len))
    }
}
