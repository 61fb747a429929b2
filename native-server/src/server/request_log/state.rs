//! What the request-log layer reads: the rules and meters a request's context starts with,
//! and the bus its event goes to.

use std::sync::Arc;

use weft_storage::Storage;

use super::LogBus;
use crate::server::auth::usage::Usage;
use crate::server::moderation::Moderation;

#[derive(Clone)]
pub struct LogState {
    pub moderation: Arc<Moderation>,
    pub usage: Arc<Usage>,
    pub storage: Storage,
    pub logs: Arc<LogBus>,
}
