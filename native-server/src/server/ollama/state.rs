//! What the Ollama surface's handlers read.

use std::sync::Arc;

use crate::registry::Registry;
use crate::server::code::CodeTools;
use crate::server::config::ServeConfig;
use crate::server::inference::Inference;
use crate::server::jobs::JobsState;
use crate::server::model_names::NameSync;

#[derive(Clone)]
pub struct OllamaState {
    pub cfg: Arc<ServeConfig>,
    pub inference: Arc<Inference>,
    pub registry: Arc<Registry>,
    pub code: Arc<CodeTools>,
    /// Model names changed by `/api/copy`, `/api/delete`, `/api/create` are stored through it.
    pub names: Arc<NameSync>,
    /// `/api/create` from uploaded files runs as a model job.
    pub jobs: JobsState,
}
