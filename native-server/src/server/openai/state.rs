//! What the OpenAI surface's handlers read.

use std::sync::Arc;

use axum::extract::FromRef;

use super::responses::store::ResponseStore;
use crate::registry::Registry;
use crate::server::code::CodeTools;
use crate::server::config::ServeConfig;
use crate::server::inference::Inference;

#[derive(Clone)]
pub struct OpenAiState {
    pub cfg: Arc<ServeConfig>,
    pub inference: Arc<Inference>,
    pub registry: Arc<Registry>,
    /// Stored responses (`/v1/responses/{id}`, `previous_response_id`).
    pub responses: Arc<ResponseStore>,
    pub code: Arc<CodeTools>,
}

impl FromRef<OpenAiState> for Arc<Inference> {
    fn from_ref(st: &OpenAiState) -> Self {
        st.inference.clone()
    }
}
