//! What the moderation-rule routes read.

use std::sync::Arc;

use weft_storage::Storage;

use super::Moderation;

#[derive(Clone)]
pub struct ModerationState {
    pub moderation: Arc<Moderation>,
    pub storage: Storage,
}
