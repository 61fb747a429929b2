//! Chat-UI sessions: each tracks its conversation so a request may send only the new turn
//! (kept in the admin storage: `store.rs`).

use axum::extract::{Path, State};
use axum::Json;

use super::types::{SessionCreated, SessionDeleted};
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::state::Shared;

/// The session of requests that name none; it cannot be deleted.
pub const DEFAULT_SESSION: &str = "__default__";

#[utoipa::path(post, path = "/sessions", tag = "chat-ui",
    responses((status = 200, body = SessionCreated)))]
pub async fn create(State(st): State<Shared>) -> Result<Json<SessionCreated>, PlainError> {
    let id = crate::server::common::ids::unique();
    st.sessions.create(&id).await?;
    Ok(Json(SessionCreated { session_id: id }))
}

#[utoipa::path(delete, path = "/sessions/{id}", tag = "chat-ui",
    params(("id" = String, Path, description = "A session id")),
    responses((status = 200, body = SessionDeleted), (status = 404, body = PlainErrorBody)))]
pub async fn delete(
    State(st): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<SessionDeleted>, PlainError> {
    if id == DEFAULT_SESSION {
        return Err(ApiError::invalid("the default session cannot be deleted").into());
    }
    match st.sessions.delete(&id).await? {
        true => {
            st.code.drop_session(&id);
            st.uploads.drop_session(&id).await;
            Ok(Json(SessionDeleted {
                ok: true,
                session_id: id,
            }))
        }
        false => Err(ApiError::not_found(format!("unknown session {id:?}")).into()),
    }
}
