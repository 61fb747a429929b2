//! What every handler shares: the server settings and the model registry.

use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Instant, SystemTime};

use serde_json::Value;
use weft_core::sampler::SamplerConfig;
use weft_storage::Storage;

use super::auth::Auth;
use super::common::sampling::{resolve_with, Precedence, SamplingFields};
use super::context::RequestCtx;
use super::error::ApiError;
use super::leased::Leased;
use super::openai::responses::store::ResponseStore;
use crate::registry::{KeepAlive, Registry};

/// Settings from the `weft serve` command line.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub backend: String,
    pub n_ctx: usize,
    pub parallel: usize,
    /// Default and cap of generated tokens per request.
    pub max_tokens: usize,
    pub queue: usize,
    /// Largest request body accepted, in bytes.
    pub body_limit: usize,
    pub sampling: SamplingFields,
    pub precedence: Precedence,
    /// Where uploads go and how large they may be.
    pub uploads: super::uploads::UploadConfig,
    /// Host names and origins the server answers (`--allowed-host`, `--cors-origin`).
    pub site: super::site::SiteConfig,
}

/// Shared server state.
pub struct AppState {
    pub cfg: ServeConfig,
    pub registry: Arc<Registry>,
    /// How loading the default model at start-up went (`/ready` waits for it).
    pub preload: OnceLock<Result<(), String>>,
    pub started: Instant,
    /// Chat-UI sessions: id → tracked conversation, in the storage.
    pub sessions: super::ui::store::Sessions,
    /// Model jobs (pull, import, quantize), when there is a models directory to write into.
    pub jobs: Option<Arc<super::jobs::ModelJobs>>,
    /// The sandbox (with --code-exec), skills and artifacts.
    pub code: super::code::CodeTools,
    /// Responses stored for `/v1/responses/{id}` and `previous_response_id` (in the
    /// database, each with its owner).
    pub responses: Arc<ResponseStore>,
    /// Files uploaded for the chat UI.
    pub uploads: super::uploads::Uploads,
    /// Keys, users, tenants, settings, audit.
    pub storage: Storage,
    pub auth: Auth,
    /// Sampling defaults from the admin settings (below request and operator values).
    pub defaults: RwLock<SamplingFields>,
    /// The `max_tokens` setting; 0: `--max-tokens`.
    max_tokens: std::sync::atomic::AtomicUsize,
    /// Moderation rules and the `moderation` setting.
    pub moderation: Arc<super::moderation::Moderation>,
    /// Finished requests, for `/api/v1/logs/stream`.
    pub logs: super::request_log::LogBus,
    /// Set by `POST /api/v1/restart`; `weft serve` watches it to drain and re-execute.
    pub restart: tokio::sync::watch::Sender<bool>,
    /// Keeps the catalog's saved names and the database in step.
    pub names: super::model_names::NameSync,
}

/// The handle handlers get.
pub type Shared = Arc<AppState>;

impl AppState {
    pub fn new(
        cfg: ServeConfig,
        registry: Arc<Registry>,
        jobs: Option<Arc<super::jobs::ModelJobs>>,
        code: super::code::CodeTools,
        storage: Storage,
        auth: Auth,
    ) -> Self {
        let uploads = super::uploads::Uploads::new(cfg.uploads.clone());
        let sessions = super::ui::store::Sessions::new(storage.clone());
        let responses = Arc::new(ResponseStore::new(storage.clone()));
        AppState {
            moderation: Arc::new(super::moderation::Moderation::new(storage.clone())),
            logs: Default::default(),
            storage,
            auth,
            defaults: RwLock::new(SamplingFields::default()),
            max_tokens: std::sync::atomic::AtomicUsize::new(0),
            restart: tokio::sync::watch::Sender::new(false),
            cfg,
            registry,
            jobs,
            code,
            preload: OnceLock::new(),
            started: Instant::now(),
            sessions,
            responses,
            uploads,
            names: Default::default(),
        }
    }

    /// The default and cap of generated tokens per request.
    pub fn max_tokens(&self) -> usize {
        match self.max_tokens.load(std::sync::atomic::Ordering::Relaxed) {
            0 => self.cfg.max_tokens,
            n => n,
        }
    }

    /// Applies the `max_tokens` setting (`None`: back to `--max-tokens`).
    pub fn set_max_tokens(&self, n: Option<usize>) {
        self.max_tokens
            .store(n.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
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
        let model = super::auth::access::admit(self, ctx, model).await?;
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
            &self.cfg.sampling,
            self.cfg.precedence,
            &defaults,
            logit_bias,
        )
    }

    /// The model jobs, or a 503 saying why there are none.
    pub fn jobs(&self) -> Result<&Arc<super::jobs::ModelJobs>, ApiError> {
        self.jobs.as_ref().ok_or_else(|| {
            ApiError::unavailable(
                "model jobs need a models directory: start the server with --models-dir (or without --model, to use $WEFT_HOME/models)",
            )
        })
    }

    /// Seconds since the Unix epoch.
    pub fn now_unix() -> u64 {
        unix(SystemTime::now())
    }
}

/// Seconds since the Unix epoch of a time.
pub fn unix(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// RFC 3339 UTC time.
pub fn rfc3339(t: SystemTime) -> String {
    weft_core::chat::strftime("%Y-%m-%dT%H:%M:%SZ", unix(t) as i64).unwrap_or_default()
}
