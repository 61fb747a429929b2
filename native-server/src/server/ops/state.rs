//! What `/health`, `/ready` and the metrics read.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::registry::Registry;
use crate::server::config::ServeConfig;

#[derive(Clone)]
pub struct OpsState {
    pub cfg: Arc<ServeConfig>,
    pub registry: Arc<Registry>,
    /// How loading the default model at start-up went (`/ready` waits for it).
    pub preload: Arc<OnceLock<Result<(), String>>>,
    pub started: Instant,
}
