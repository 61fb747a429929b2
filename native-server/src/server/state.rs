//! What every handler shares: the server settings and the model registry.

use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime};

use axum::extract::FromRef;
use weft_storage::Storage;

use super::auth::Auth;
use super::common::sampling::{Precedence, SamplingFields};
use super::error::ApiError;
use super::inference::Inference;
use super::openai::responses::store::ResponseStore;
use crate::registry::Registry;

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
    /// Per-request bounds on images (`--max-images`, `--max-image-bytes`,
    /// `--max-image-pixels`).
    pub images: super::common::images::ImageLimits,
}

/// Shared server state.
pub struct AppState {
    pub cfg: ServeConfig,
    pub registry: Arc<Registry>,
    /// Leasing models for requests, with the checks and limits (the same registry).
    pub inference: Arc<Inference>,
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
    /// Moderation rules and the `moderation` setting.
    pub moderation: Arc<super::moderation::Moderation>,
    /// Finished requests, for `/api/v1/logs/stream`.
    pub logs: super::request_log::LogBus,
    /// Set by `POST /api/v1/restart`; `weft serve` watches it to drain and re-execute.
    pub restart: tokio::sync::watch::Sender<bool>,
    /// Keeps the catalog's saved names and the database in step.
    pub names: super::model_names::NameSync,
}

/// The handle the router holds and handlers get: the whole state, from which each service a
/// handler needs can be taken on its own (`State<Arc<Inference>>`, by [`FromRef`]).
#[derive(Clone)]
pub struct Shared(Arc<AppState>);

impl Shared {
    pub fn new(state: AppState) -> Self {
        Shared(Arc::new(state))
    }
}

impl std::ops::Deref for Shared {
    type Target = AppState;
    fn deref(&self) -> &AppState {
        &self.0
    }
}

impl FromRef<Shared> for Arc<Inference> {
    fn from_ref(st: &Shared) -> Self {
        st.inference.clone()
    }
}

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
        let mut inference = Inference::new(
            registry.clone(),
            storage.clone(),
            auth.usage.clone(),
            cfg.n_ctx,
            cfg.max_tokens,
            cfg.sampling.clone(),
            cfg.precedence,
        );
        inference.images = cfg.images.clone();
        let inference = Arc::new(inference);
        AppState {
            inference,
            moderation: Arc::new(super::moderation::Moderation::new(storage.clone())),
            logs: Default::default(),
            storage,
            auth,
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
