//! What the admin plane's handlers read: most of the server, since it manages it.

use std::sync::Arc;
use std::time::Instant;

use weft_storage::Storage;

use crate::registry::Registry;
use crate::server::auth::Auth;
use crate::server::config::ServeConfig;
use crate::server::error::ApiError;
use crate::server::inference::Inference;
use crate::server::jobs::ModelJobs;
use crate::server::model_names::NameSync;
use crate::server::moderation::Moderation;
use crate::server::request_log::LogBus;

#[derive(Clone)]
pub struct AdminState {
    pub cfg: Arc<ServeConfig>,
    pub registry: Arc<Registry>,
    pub inference: Arc<Inference>,
    /// Keys, users, tenants, settings, audit.
    pub storage: Storage,
    pub auth: Arc<Auth>,
    pub moderation: Arc<Moderation>,
    /// Finished requests, for `/api/v1/logs/stream`.
    pub logs: Arc<LogBus>,
    /// Set by `POST /api/v1/restart`; `weft serve` watches it to drain and re-execute.
    pub restart: tokio::sync::watch::Sender<bool>,
    pub started: Instant,
    pub names: Arc<NameSync>,
    /// Model jobs, when there is a models directory (adapters and the library read its store).
    pub jobs: Option<Arc<ModelJobs>>,
}

impl AdminState {
    /// The model jobs, or a 503 saying why there are none.
    pub fn jobs(&self) -> Result<&Arc<ModelJobs>, ApiError> {
        crate::server::jobs::required(&self.jobs)
    }
}
