//! Everything under `/api`: the Ollama surface, the chat-UI protocol and the admin plane
//! (`/api/v1`), and the one route they share.
//!
//! **`/api/chat` rule:** a body without a `model` field that has at least one of `sessionId`,
//! `maxTokens` or `newChat` is a chat-UI request (SSE frames); every other body is an Ollama
//! chat (Ollama clients always send `model`, so they are never misrouted). `/api/ui/chat` and
//! `/api/chat/ollama` are the unambiguous forms.

use axum::extract::State;
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::caller::Caller;
use super::auth::Routes;
use super::context::RequestCtx;
use super::error::{PlainError, PlainErrorBody};
use super::extract::{from_value, ApiJson};
use super::state::Shared;

/// Routes relative to `/api`.
pub fn routes() -> Routes {
    Routes::user(OpenApiRouter::new().routes(routes!(chat)))
        .merge(super::ollama::routes())
        .merge(super::ui::routes())
        .merge(super::admin::ui_routes())
        .merge(super::skills::ui_routes())
        .merge(super::code::routes())
        .merge(super::uploads::api_routes())
        .nest("/v1", super::admin::routes())
}

/// Whether a `/api/chat` body is a chat-UI request.
pub fn is_ui_body(v: &Value) -> bool {
    v.get("model").is_none()
        && ["sessionId", "maxTokens", "newChat"]
            .iter()
            .any(|k| v.get(k).is_some())
}

/// `/api/chat`: the chat-UI protocol or Ollama's chat, by the rule above.
#[utoipa::path(post, path = "/chat", tag = "ollama",
    request_body(description = "An Ollama chat request, or a chat-UI request (see the rule)",
                 content = Object),
    responses((status = 200, description = "Ollama NDJSON frames, or chat-UI SSE frames"),
              (status = 400, body = PlainErrorBody)))]
async fn chat(
    State(st): State<Shared>,
    ctx: RequestCtx,
    caller: Caller,
    ApiJson(v): ApiJson<Value>,
) -> Result<axum::response::Response, PlainError> {
    if is_ui_body(&v) {
        let v = super::ui::attachments::apply(&st, caller.owner(), v).await?;
        super::ui::chat::chat(st, ctx, caller, from_value(v)?).await
    } else {
        super::ollama::chat::chat(st, ctx, caller, from_value(v)?).await
    }
}
