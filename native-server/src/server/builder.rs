//! How a program makes a server: [`Builder`] takes what was configured (settings, the model
//! registry, the models store, the sandbox, where the database is, where to listen) and
//! [`Builder::build`] opens the database, refuses an unprotected public listener, and starts
//! the settings that other replicas change. `weft serve` (`cli/serve.rs`) only turns its flags
//! into these values; everything a running server does lives here and in `serve.rs`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::FromRef;
use weft_storage::Storage;

use super::admin::AdminState;
use super::serve::Server;
use super::{admin, auth, code, jobs, model_names, AppState, ServeConfig};
use crate::registry::Registry;
use crate::store::Store;

/// A server being configured.
pub struct Builder {
    cfg: ServeConfig,
    registry: Arc<Registry>,
    addr: SocketAddr,
    database_url: String,
    store: Option<(Store, usize)>,
    code: code::CodeTools,
    admin_key: Option<String>,
    insecure_no_auth: bool,
    /// A video model to serve: the pipeline, its name, the default fps.
    video: Option<(weft_core::diffusion::WanPipeline, String, u32)>,
}

impl Builder {
    /// A server with these settings, models and sandbox (`code`: skills, artifacts and, when
    /// enabled, code execution), listening on `addr`, its state in the database at
    /// `database_url` (`sqlite:…` or `postgres://…`).
    pub fn new(
        cfg: ServeConfig,
        registry: Arc<Registry>,
        code: code::CodeTools,
        addr: SocketAddr,
        database_url: String,
    ) -> Self {
        Builder {
            cfg,
            registry,
            addr,
            database_url,
            store: None,
            code,
            admin_key: None,
            insecure_no_auth: false,
            video: None,
        }
    }

    /// The models directory model jobs (pull, import, quantize) write into, and how many run
    /// at once. Without it those routes are 503.
    pub fn models_store(mut self, store: Store, max_jobs: usize) -> Self {
        self.store = Some((store, max_jobs.max(1)));
        self
    }

    /// Serves `pipeline` on the video routes (named `name`; `fps` when a request names none).
    pub fn video(
        mut self,
        pipeline: weft_core::diffusion::WanPipeline,
        name: String,
        fps: u32,
    ) -> Self {
        self.video = Some((pipeline, name, fps));
        self
    }

    /// The `WEFT_ADMIN_KEY` bearer key, an admin key kept outside the database.
    pub fn admin_key(mut self, key: Option<String>) -> Self {
        self.admin_key = key.filter(|k| !k.is_empty());
        self
    }

    /// Listen on a public address with no key at all (`--insecure-no-auth`).
    pub fn insecure_no_auth(mut self, yes: bool) -> Self {
        self.insecure_no_auth = yes;
        self
    }

    /// Opens the database and makes the server's state; nothing listens yet.
    pub async fn build(self) -> anyhow::Result<Server> {
        let storage = Storage::open(&self.database_url).await?;
        if !self.addr.ip().is_loopback()
            && !self.insecure_no_auth
            && self.admin_key.is_none()
            && storage.active_key_count().await? == 0
        {
            anyhow::bail!(
                "refusing to listen on {} with no API key: anyone could use and administer \
                 this server. Create one (weft keys create --role admin), set WEFT_ADMIN_KEY, \
                 or pass --insecure-no-auth",
                self.addr
            );
        }
        let jobs = self
            .store
            .map(|(store, n)| jobs::ModelJobs::new(store, self.registry.clone(), n));
        let auth = auth::Auth::new(self.admin_key.as_deref());
        // Generations queue on one thread of their own, on the model jobs' store when there
        // is one (so /api/v1/jobs lists and cancels them).
        let video = self.video.map(|(pipeline, name, fps)| {
            let runner = jobs.as_ref().map(|j| j.video_runner());
            Arc::new(super::video::VideoService::new(pipeline, name, fps, runner))
        });
        let mut app = AppState::new(self.cfg, self.registry, jobs, self.code, storage, auth);
        app.video = video;
        let state = super::Shared::new(app);
        if let Some(j) = &state.jobs {
            j.persist(state.storage.clone())
                .await
                .map_err(|e| anyhow::anyhow!("keeping jobs in the database: {e}"))?;
        }
        start_settings(&state)
            .await
            .map_err(|e| anyhow::anyhow!(e.message))?;
        Ok(Server::new(self.addr, state))
    }
}

/// Loads the persisted settings and model names and starts following changes other replicas
/// make.
async fn start_settings(state: &super::Shared) -> Result<(), super::ApiError> {
    model_names::start(&state.names).await?;
    admin::settings::reload(&AdminState::from_ref(state)).await?;
    admin::settings::spawn_sync(AdminState::from_ref(state));
    state.moderation.reload().await?;
    state.moderation.clone().spawn_sync();
    Ok(())
}
