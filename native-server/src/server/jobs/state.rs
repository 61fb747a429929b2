//! What the model-job routes read.

use std::sync::Arc;

use super::work::ModelJobs;
use crate::server::error::ApiError;

#[derive(Clone)]
pub struct JobsState {
    /// The model jobs, when there is a models directory to write into.
    pub jobs: Option<Arc<ModelJobs>>,
}

impl JobsState {
    /// The model jobs, or a 503 saying why there are none.
    pub fn jobs(&self) -> Result<&Arc<ModelJobs>, ApiError> {
        required(&self.jobs)
    }
}

/// The model jobs, or a 503 saying why there are none.
pub fn required(jobs: &Option<Arc<ModelJobs>>) -> Result<&Arc<ModelJobs>, ApiError> {
    jobs.as_ref().ok_or_else(|| {
        ApiError::unavailable(
            "model jobs need a models directory: start the server with --models-dir (or without --model, to use $WEFT_HOME/models)",
        )
    })
}
