//! The storage error: what failed, mapped by callers to a status (404, 409, 500).

/// A storage operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The row asked for does not exist (`what` names it, e.g. `key k_12`).
    #[error("{0} not found")]
    NotFound(String),
    /// A unique name is already taken, or a referenced row is missing.
    #[error("{0}")]
    Conflict(String),
    /// The database URL is not one this build understands.
    #[error("unsupported database URL {0:?}: use sqlite://PATH or postgres://USER@HOST:PORT/DB")]
    BadUrl(String),
    /// The database could not be opened or migrated.
    #[error("opening the database: {0}")]
    Open(String),
    /// A stored value is not what the schema says (a corrupt JSON column).
    #[error("corrupt stored value: {0}")]
    Corrupt(String),
    /// Data given to load (a backup) does not fit the schema: an unknown table or column, a
    /// value of the wrong type, rows that break a constraint.
    #[error("{0}")]
    Invalid(String),
    /// Any other database failure (connection lost, disk full).
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
}

impl From<sqlx::Error> for StorageError {
    fn from(e: sqlx::Error) -> Self {
        if let sqlx::Error::Database(d) = &e {
            if d.is_unique_violation() {
                return StorageError::Conflict(format!("already exists ({})", d.message()));
            }
            if d.is_foreign_key_violation() {
                return StorageError::Conflict(format!(
                    "refers to a row that does not exist ({})",
                    d.message()
                ));
            }
        }
        StorageError::Database(e)
    }
}

/// Shorthand for storage results.
pub type Result<T> = std::result::Result<T, StorageError>;
