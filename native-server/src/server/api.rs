//! Everything under `/api`: the Ollama surface, the chat-UI protocol and the admin plane
//! (`/api/v1`), and the one route they share.
//!
//! **`/api/chat` rule:** a body without a `model` field that has at least one of `sessionId`,
//! `maxTokens` or `newChat` is a chat-UI request (SSE frames); every other body is an Ollama
//! chat (Ollama clients always send `model`, so they are never misrouted). `/api/ui/chat` and
//! `/api/chat/ollama` are the unambiguous forms.

use axum::extract::{FromRef, State};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::caller::Caller;
use super::auth::context::RequestCtx;
use super::auth::Routes;
use super::error::{PlainError, PlainErrorBody};
use super::extract::{from_value, ApiJson};
use super::ollama::OllamaState;
use super::state::Shared;
use super::ui::UiState;

/// Routes relative to `/api`.
pub fn routes() -> Routes<Shared> {
    Routes::user(OpenApiRouter::new().routes(routes!(chat)))
        .merge(super::ollama::routes())
        .merge(super::ui::routes())
        .merge(super::admin::ui_routes())
        .merge(super::skills::ui_routes())
        .merge(super::code::routes())
        .merge(super::uploads::api_routes())
        .merge(super::video::api_routes())
        .nest(
            "/v1",
            super::admin::routes()
                .merge(Routes::admin(super::jobs::admin_routes()))
                .merge(Routes::admin(super::admin::moderation_rules::routes())),
        )
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
        let ui = UiState::from_ref(&st);
        let v = super::ui::attachments::apply(&ui, caller.owner(), v).await?;
        super::ui::chat::chat(ui, ctx, caller, from_value(v)?).await
    } else {
        super::ollama::chat::chat(OllamaState::from_ref(&st), ctx, caller, from_value(v)?).await
    }
}
