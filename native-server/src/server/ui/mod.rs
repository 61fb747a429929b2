//! The chat-UI protocol, under `/api`: sessions, an SSE chat stream with `token` / `thinking`
//! frames and a terminal `done` frame, the model list and queue status. `/api/chat` is shared
//! with Ollama and routed in `server/api.rs`.

pub mod attachments;
pub mod chat;
mod history;
mod image_paths;
mod sessions;
mod state;
mod status;
mod tool_loop;
pub mod types;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::server::auth::RouterState;
use axum::extract::FromRef;
pub use state::UiState;

/// Routes relative to `/api` (`/api/chat` is routed by `server/api.rs`).
pub fn routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    UiState: FromRef<S>,
{
    use crate::server::auth::Routes;
    let reads = OpenApiRouter::new()
        .routes(routes!(history::history))
        .routes(routes!(status::models))
        .routes(routes!(status::queue));
    let changes = OpenApiRouter::new()
        .routes(routes!(chat::ui_chat))
        .routes(routes!(sessions::create))
        .routes(routes!(sessions::delete));
    Routes::read(reads).merge(Routes::user(changes))
}
