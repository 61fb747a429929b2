//! The server's whole state, held by the router, and how each surface's part is taken from it
//! ([`FromRef`]). Only the router and the builder name it: every surface's handlers take their
//! own state (`OpenAiState`, `AdminState`, ...), so no surface reaches into another's services.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::FromRef;
use weft_storage::Storage;

use super::admin::AdminState;
use super::auth::{Auth, AuthState};
use super::code::{CodeState, CodeTools};
use super::config::ServeConfig;
use super::conversations::Sessions;
use super::inference::Inference;
use super::jobs::{JobsState, ModelJobs};
use super::login::LoginState;
use super::model_names::NameSync;
use super::moderation::{Moderation, ModerationState};
use super::ollama::OllamaState;
use super::openai::responses::store::ResponseStore;
use super::openai::OpenAiState;
use super::ops::OpsState;
use super::request_log::{LogBus, LogState};
use super::site::SiteConfig;
use super::ui::UiState;
use super::uploads::{Uploads, UploadsState};
use super::web::WebState;
use crate::registry::Registry;

/// Every service of the server.
pub struct AppState {
    pub cfg: Arc<ServeConfig>,
    pub registry: Arc<Registry>,
    /// Leasing models for requests, with the checks and limits (the same registry).
    pub inference: Arc<Inference>,
    /// How loading the default model at start-up went (`/ready` waits for it).
    pub preload: Arc<OnceLock<Result<(), String>>>,
    pub started: Instant,
    /// Chat-UI sessions: id → tracked conversation, in the storage.
    pub sessions: Arc<Sessions>,
    /// Model jobs (pull, import, quantize), when there is a models directory to write into.
    pub jobs: Option<Arc<ModelJobs>>,
    /// The sandbox (with --code-exec), skills and artifacts.
    pub code: Arc<CodeTools>,
    /// Responses stored for `/v1/responses/{id}` and `previous_response_id` (in the
    /// database, each with its owner).
    pub responses: Arc<ResponseStore>,
    /// Files uploaded for the chat UI.
    pub uploads: Arc<Uploads>,
    /// Keys, users, tenants, settings, audit.
    pub storage: Storage,
    pub auth: Arc<Auth>,
    /// Moderation rules and the `moderation` setting.
    pub moderation: Arc<Moderation>,
    /// Finished requests, for `/api/v1/logs/stream`.
    pub logs: Arc<LogBus>,
    /// Set by `POST /api/v1/restart`; `weft serve` watches it to drain and re-execute.
    pub restart: tokio::sync::watch::Sender<bool>,
    /// Keeps the catalog's saved names and the database in step.
    pub names: Arc<NameSync>,
    /// The served video model (`--model` a Wan folder), if any.
    pub video: Option<Arc<super::video::VideoService>>,
}

/// The handle the router holds.
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

impl AppState {
    pub fn new(
        cfg: ServeConfig,
        registry: Arc<Registry>,
        jobs: Option<Arc<ModelJobs>>,
        code: CodeTools,
        storage: Storage,
        auth: Auth,
    ) -> Self {
        let uploads = Uploads::new(cfg.uploads.clone());
        let sessions = Sessions::new(storage.clone());
        let responses = Arc::new(ResponseStore::new(storage.clone()));
        let auth = Arc::new(auth);
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
            moderation: Arc::new(Moderation::new(storage.clone())),
            logs: Default::default(),
            names: Arc::new(NameSync::new(registry.clone(), storage.clone())),
            storage,
            auth,
            restart: tokio::sync::watch::Sender::new(false),
            cfg: Arc::new(cfg),
            registry,
            jobs,
            code: Arc::new(code),
            preload: Default::default(),
            started: Instant::now(),
            sessions: Arc::new(sessions),
            responses,
            uploads: Arc::new(uploads),
            video: None,
        }
    }
}

impl FromRef<Shared> for super::video::VideoState {
    fn from_ref(st: &Shared) -> Self {
        super::video::VideoState {
            video: st.video.clone(),
            uploads: st.uploads.clone(),
            sessions: st.sessions.clone(),
        }
    }
}

impl FromRef<Shared> for Arc<Inference> {
    fn from_ref(st: &Shared) -> Self {
        st.inference.clone()
    }
}

impl FromRef<Shared> for OpenAiState {
    fn from_ref(st: &Shared) -> Self {
        OpenAiState {
            cfg: st.cfg.clone(),
            inference: st.inference.clone(),
            registry: st.registry.clone(),
            responses: st.responses.clone(),
            code: st.code.clone(),
        }
    }
}

impl FromRef<Shared> for OllamaState {
    fn from_ref(st: &Shared) -> Self {
        OllamaState {
            cfg: st.cfg.clone(),
            inference: st.inference.clone(),
            registry: st.registry.clone(),
            code: st.code.clone(),
            names: st.names.clone(),
            jobs: JobsState::from_ref(st),
        }
    }
}

impl FromRef<Shared> for UiState {
    fn from_ref(st: &Shared) -> Self {
        UiState {
            cfg: st.cfg.clone(),
            inference: st.inference.clone(),
            registry: st.registry.clone(),
            code: st.code.clone(),
            sessions: st.sessions.clone(),
            uploads: st.uploads.clone(),
            video: st.video.clone(),
        }
    }
}

impl FromRef<Shared> for AdminState {
    fn from_ref(st: &Shared) -> Self {
        AdminState {
            cfg: st.cfg.clone(),
            registry: st.registry.clone(),
            inference: st.inference.clone(),
            storage: st.storage.clone(),
            auth: st.auth.clone(),
            moderation: st.moderation.clone(),
            logs: st.logs.clone(),
            restart: st.restart.clone(),
            started: st.started,
            names: st.names.clone(),
            jobs: st.jobs.clone(),
        }
    }
}

impl FromRef<Shared> for JobsState {
    fn from_ref(st: &Shared) -> Self {
        JobsState {
            jobs: st.jobs.clone(),
        }
    }
}

impl FromRef<Shared> for OpsState {
    fn from_ref(st: &Shared) -> Self {
        OpsState {
            cfg: st.cfg.clone(),
            registry: st.registry.clone(),
            preload: st.preload.clone(),
            started: st.started,
        }
    }
}

impl FromRef<Shared> for UploadsState {
    fn from_ref(st: &Shared) -> Self {
        UploadsState {
            uploads: st.uploads.clone(),
            sessions: st.sessions.clone(),
            inference: st.inference.clone(),
        }
    }
}

impl FromRef<Shared> for CodeState {
    fn from_ref(st: &Shared) -> Self {
        CodeState {
            code: st.code.clone(),
        }
    }
}

impl FromRef<Shared> for LoginState {
    fn from_ref(st: &Shared) -> Self {
        LoginState {
            storage: st.storage.clone(),
        }
    }
}

impl FromRef<Shared> for ModerationState {
    fn from_ref(st: &Shared) -> Self {
        ModerationState {
            moderation: st.moderation.clone(),
            storage: st.storage.clone(),
        }
    }
}

impl FromRef<Shared> for WebState {
    fn from_ref(st: &Shared) -> Self {
        WebState {
            inference: st.inference.clone(),
            registry: st.registry.clone(),
        }
    }
}

impl FromRef<Shared> for AuthState {
    fn from_ref(st: &Shared) -> Self {
        AuthState {
            auth: st.auth.clone(),
            storage: st.storage.clone(),
        }
    }
}

impl FromRef<Shared> for LogState {
    fn from_ref(st: &Shared) -> Self {
        LogState {
            moderation: st.moderation.clone(),
            usage: st.auth.usage.clone(),
            storage: st.storage.clone(),
            logs: st.logs.clone(),
        }
    }
}

impl FromRef<Shared> for SiteConfig {
    fn from_ref(st: &Shared) -> Self {
        st.cfg.site.clone()
    }
}
