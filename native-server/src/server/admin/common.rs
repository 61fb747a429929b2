//! What the admin handlers share: list bodies, name checks, audit details, time input.

use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::server::auth::policy::Role;
use crate::server::auth::AuditDetails;
use crate::server::error::{ApiError, PlainError};

/// A handler's result: a status, the details for its audit row, and the body.
pub type Changed<T> = Result<(StatusCode, Extension<AuditDetails>, Json<T>), PlainError>;

/// A successful change with what the audit row should say about it.
pub fn changed<T>(status: StatusCode, details: Value, body: T) -> Changed<T> {
    Ok((status, Extension(AuditDetails(details)), Json(body)))
}

/// `{"data": [...]}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct List<T> {
    pub data: Vec<T>,
}

/// A name for a key, user or tenant: 1 to 100 characters, no control characters.
pub fn check_name(what: &str, name: &str) -> Result<String, ApiError> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > 100 || n.chars().any(char::is_control) {
        return Err(ApiError::invalid(format!(
            "{what} name must be 1 to 100 printable characters"
        )));
    }
    Ok(n.to_string())
}

/// A role from a request body.
pub fn check_role(role: &str) -> Result<Role, ApiError> {
    Role::parse(role).ok_or_else(|| {
        ApiError::invalid(format!(
            "unknown role {role:?}: use admin, user or readonly"
        ))
    })
}

/// A time given as Unix seconds or an RFC 3339 string (`2027-01-31T12:00:00Z`).
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum TimeInput {
    Unix(i64),
    Text(String),
}

impl TimeInput {
    /// Unix seconds.
    pub fn seconds(&self, field: &str) -> Result<i64, ApiError> {
        match self {
            TimeInput::Unix(s) => Ok(*s),
            TimeInput::Text(t) => super::time::parse_rfc3339(t).ok_or_else(|| {
                ApiError::invalid(format!(
                    "{field} must be Unix seconds or an RFC 3339 time such as 2027-01-31T12:00:00Z, not {t:?}"
                ))
            }),
        }
    }
}

/// A tenant named in a body must exist (400, not 404: the URL was found).
pub async fn check_tenant(
    storage: &weft_storage::Storage,
    tenant: Option<&str>,
) -> Result<(), ApiError> {
    if let Some(t) = tenant {
        match storage.get_tenant(t).await {
            Ok(_) => {}
            Err(weft_storage::StorageError::NotFound(_)) => {
                return Err(ApiError::invalid(format!("unknown tenant {t:?}")))
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
