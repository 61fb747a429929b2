//! The chat-UI protocol, under `/api`: sessions, an SSE chat stream with `token` / `thinking`
//! frames and a terminal `done` frame, the model list and queue status. `/api/chat` is shared
//! with Ollama and routed in `server/api.rs`.

pub mod chat;
mod sessions;
mod status;
mod tool_loop;
pub mod types;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::state::Shared;

/// Routes relative to `/api` (`/api/chat` is routed by `server/api.rs`).
pub fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new()
        .routes(routes!(chat::ui_chat))
        .routes(routes!(sessions::create))
        .routes(routes!(sessions::delete))
        .routes(routes!(status::models))
        .routes(routes!(status::queue))
}
