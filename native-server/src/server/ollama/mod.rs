//! The Ollama surface, under `/api`: generate and chat (NDJSON streaming by default), model
//! management (tags, ps, show, create, copy, delete), embeddings (`server/embeddings/`), version. `/api/chat` itself is shared with
//! the chat-UI protocol and routed in `server/api.rs`; `/api/chat/ollama` is the unambiguous
//! alias.

pub mod chat;
mod generate;
pub mod models;
mod respond;
mod state;
mod tool_loop;
pub mod types;

use axum::response::Response;
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::PlainError;
use crate::server::auth::RouterState;
use crate::server::inference::Inference;
use crate::server::jobs::JobsState;
use axum::extract::FromRef;
pub use state::OllamaState;
use std::sync::Arc;
use types::Version;

type Res = Result<Response, PlainError>;

/// RFC 3339 UTC time of now.
fn now_rfc3339() -> String {
    super::clock::rfc3339(std::time::SystemTime::now())
}

/// Routes relative to `/api` (`/api/chat` is routed by `server/api.rs`).
pub fn routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    OllamaState: FromRef<S>,
    Arc<Inference>: FromRef<S>,
    JobsState: FromRef<S>,
{
    use crate::server::auth::Routes;
    let inference = OpenApiRouter::new()
        .routes(routes!(generate::generate))
        .routes(routes!(chat::chat_alias));
    Routes::user(inference)
        .merge(Routes::read(OpenApiRouter::new().routes(routes!(version))))
        .merge(models::routes())
        .merge(super::embeddings::ollama_routes())
        .merge(super::jobs::ollama_routes())
}

#[utoipa::path(get, path = "/version", tag = "ollama", responses((status = 200, body = Version)))]
async fn version() -> Json<Version> {
    Json(Version {
        version: env!("CARGO_PKG_VERSION"),
    })
}
