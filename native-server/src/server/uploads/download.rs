//! `GET /uploads/{name}?sessionId=...`: a stored upload, for the principal and session that
//! uploaded it (no `sessionId`: the caller's default session).

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::store::valid_name;
use super::types::SessionQuery;
use crate::server::auth::caller::Caller;
use crate::server::conversations::default_session;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::uploads::UploadsState;

/// Served with `nosniff` and a sandboxing CSP: whatever a file holds, the browser neither
/// guesses another type nor runs it in this origin.
#[utoipa::path(get, path = "/uploads/{name}", tag = "chat-ui",
    params(("name" = String, Path, description = "The stored name from POST /api/upload"),
           SessionQuery),
    responses((status = 200, description = "The file, as its sniffed type"),
              (status = 400, body = PlainErrorBody, description = "Not a stored name"),
              (status = 404, body = PlainErrorBody,
               description = "No such file in this session")))]
pub async fn download(
    State(st): State<UploadsState>,
    caller: Caller,
    Path(name): Path<String>,
    Query(q): Query<SessionQuery>,
) -> Result<Response, PlainError> {
    if !valid_name(&name) {
        return Err(ApiError::invalid(format!(
            "{name:?} is not an upload name (names are what POST /api/upload returned)"
        ))
        .into());
    }
    let owner = caller.owner().to_string();
    let sid = q.session_id.unwrap_or_else(|| default_session(&owner));
    let store = st.uploads.store.clone();
    let found = tokio::task::spawn_blocking(move || {
        let (path, meta) = store.find(&owner, &sid, &name)?;
        std::fs::read(path).ok().map(|b| (b, meta))
    })
    .await
    .ok()
    .flatten();
    let Some((bytes, meta)) = found else {
        return Err(ApiError::not_found("no such upload in this session").into());
    };
    let ctype = match meta.kind.as_str() {
        "text" => "text/plain; charset=utf-8".to_string(),
        _ => meta.media_type.clone(),
    };
    Ok((
        [
            (header::CONTENT_TYPE, ctype),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".into()),
            (header::CONTENT_SECURITY_POLICY, "sandbox".into()),
            (header::CACHE_CONTROL, "private, no-cache".into()),
        ],
        bytes,
    )
        .into_response())
}
