//! What the sandbox, skills and artifact routes read.

use std::sync::Arc;

use super::CodeTools;

#[derive(Clone)]
pub struct CodeState {
    pub code: Arc<CodeTools>,
}
