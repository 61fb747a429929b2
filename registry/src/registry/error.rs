//! Why the registry refused or failed: typed here, mapped to a status and each API's error shape
//! once, in the server's `error.rs`.

/// A registry failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// No model has this name.
    #[error("model {name:?} not found; {}", list(known))]
    UnknownModel { name: String, known: Vec<String> },
    /// A bad name, keep-alive, template or argument.
    #[error("{0}")]
    Invalid(String),
    /// The name is taken.
    #[error("{0}")]
    Conflict(String),
    /// The model cannot be used now (broken file, failed load, larger than the budget).
    #[error("{0}")]
    Unavailable(String),
    /// Saving or deleting a file failed.
    #[error("{0}")]
    Io(String),
}

fn list(known: &[String]) -> String {
    if known.is_empty() {
        "this server has no models".to_string()
    } else {
        format!("available: {}", known.join(", "))
    }
}

impl RegistryError {
    pub fn invalid(msg: impl Into<String>) -> Self {
        RegistryError::Invalid(msg.into())
    }
}
