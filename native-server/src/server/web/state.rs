//! What the in-browser page's routes read.

use std::sync::Arc;

use crate::registry::Registry;
use crate::server::inference::Inference;

#[derive(Clone)]
pub struct WebState {
    pub inference: Arc<Inference>,
    pub registry: Arc<Registry>,
}
