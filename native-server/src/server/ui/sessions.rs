//! Chat-UI sessions: each tracks its conversation so a request may send only the new turn
//! (kept in the admin storage: `server/conversations.rs`). A session belongs to the principal that made it;
//! another principal's id is answered exactly like an unknown one.

use axum::extract::{Path, State};
use axum::Json;

use super::types::{SessionCreated, SessionDeleted};
use crate::server::auth::caller::Caller;
use crate::server::error::{PlainError, PlainErrorBody};
use crate::server::ui::UiState;

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
        false => Err(crate::server::conversations::unknown(&id).into()),
    }
}
