//! What the chat-UI protocol's handlers read.

use std::sync::Arc;

use crate::registry::Registry;
use crate::server::code::CodeTools;
use crate::server::config::ServeConfig;
use crate::server::conversations::Sessions;
use crate::server::inference::Inference;
use crate::server::uploads::Uploads;

#[derive(Clone)]
pub struct UiState {
    pub cfg: Arc<ServeConfig>,
    pub inference: Arc<Inference>,
    pub registry: Arc<Registry>,
    pub code: Arc<CodeTools>,
    /// The conversations, each with its owner.
    pub sessions: Arc<Sessions>,
    /// Files attached to conversations.
    pub uploads: Arc<Uploads>,
    /// The served video model, for `/api/models`' `video` block.
    pub video: Option<Arc<crate::server::video::VideoService>>,
}
