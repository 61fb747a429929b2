//! What the upload routes read.

use std::sync::Arc;

use super::Uploads;
use crate::server::conversations::Sessions;
use crate::server::inference::Inference;

#[derive(Clone)]
pub struct UploadsState {
    pub uploads: Arc<Uploads>,
    /// An upload belongs to a conversation of its owner.
    pub sessions: Arc<Sessions>,
    /// Whether a vision model is served (scanned PDFs' pages are rendered only then).
    pub inference: Arc<Inference>,
}
