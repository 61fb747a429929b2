//! Chat-UI sessions: each tracks its conversation so a request may send only the new turn
//! (kept in the admin storage: `store.rs`). A session belongs to the principal that made it;
//! another principal's id is answered exactly like an unknown one.

use axum::extract::{Path, State};
use axum::Json;
use sha2::{Digest, Sha256};

use super::types::{SessionCreated, SessionDeleted};
use crate::server::auth::caller::Caller;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::ui::UiState;

/// The session of `owner`'s requests that name none: derived from the owner, so each
/// principal has its own (its history, uploads and sandbox workspace), never a shared one.
pub fn default_session(owner: &str) -> String {
    let h = Sha256::digest(format!("weft chat-ui default session\0{owner}").as_bytes());
    let hex: String = h[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("default-{hex}")
}

/// The 404 of a session the caller does not have (missing or another principal's alike).
pub fn unknown(id: &str) -> ApiError {
    ApiError::not_found(format!(
        "unknown session {id:?}; create one with POST /api/sessions"
    ))
}

#[utoipa::path(post, path = "/sessions", tag = "chat-ui",
    responses((status = 200, body = SessionCreated)))]
pub async fn create(
    State(st): State<UiState>,
    caller: Caller,
) -> Result<Json<SessionCreated>, PlainError> {
    let id = crate::server::common::ids::unique();
    st.sessions.create(caller.owner(), &id).await?;
    Ok(Json(SessionCreated { session_id: id }))
}

/// Deletes one of the caller's sessions with its uploads and workspace (the default session
/// too: its next turn starts it afresh).
#[utoipa::path(delete, path = "/sessions/{id}", tag = "chat-ui",
    params(("id" = String, Path, description = "A session id")),
    responses((status = 200, body = SessionDeleted), (status = 404, body = PlainErrorBody)))]
pub async fn delete(
    State(st): State<UiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<SessionDeleted>, PlainError> {
    let owner = caller.owner();
    match st.sessions.delete(owner, &id).await? {
        true => {
            st.code.drop_session(owner, &id);
            st.uploads.drop_session(owner, &id).await;
            Ok(Json(SessionDeleted {
                ok: true,
                session_id: id,
            }))
        }
        false => Err(unknown(&id).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_owner_has_its_own_default_session() {
        assert_eq!(default_session("key_a"), default_session("key_a"));
        assert_ne!(default_session("key_a"), default_session("key_b"));
        assert_ne!(default_session("open"), default_session("env"));
    }
}
