//! `GET /api/sessions/{id}`: a session's tracked conversation, so a page reloaded in the
//! browser shows it again (the page keeps only ids and titles itself).

use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
use weft_core::chat::Message;

use crate::server::auth::caller::Caller;
use crate::server::error::{PlainError, PlainErrorBody};
use crate::server::ui::UiState;

/// A session and its conversation (files already inlined into the user messages).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionHistory {
    pub session_id: String,
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Message>,
}

#[utoipa::path(get, path = "/sessions/{id}", tag = "chat-ui",
    params(("id" = String, Path, description = "A session id")),
    responses((status = 200, body = SessionHistory), (status = 404, body = PlainErrorBody)))]
pub async fn history(
    State(st): State<UiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<SessionHistory>, PlainError> {
    match st.sessions.get(caller.owner(), &id).await? {
        Some(messages) => Ok(Json(SessionHistory {
            session_id: id,
            messages,
        })),
        None => Err(crate::server::conversations::unknown(&id).into()),
    }
}
