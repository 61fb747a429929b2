//! What the sign-in routes read.

use weft_storage::Storage;

#[derive(Clone)]
pub struct LoginState {
    /// Users and their password hashes.
    pub storage: Storage,
}
