//! The OpenAI surface, nested under `/v1`: chat completions, completions, responses
//! (`responses/`), models, embeddings (`server/embeddings/`), tokenize/detokenize, metrics,
//! and a 501 in OpenAI's error shape for every other `/v1` path.

mod chat;
mod completions;
mod models;
mod request;
mod respond;
pub mod responses;
mod state;
mod tokenize;
mod tool_loop;
pub mod types;

use axum::extract::Path;
use axum::response::Response;
use axum::routing::any;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, OpenAiError};
use crate::server::auth::RouterState;
use crate::server::code::CodeState;
use crate::server::inference::Inference;
use crate::server::ops::OpsState;
use axum::extract::FromRef;
pub use state::OpenAiState;
use std::sync::Arc;

type Res = Result<Response, OpenAiError>;

/// Routes relative to `/v1`.
pub fn routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    OpenAiState: FromRef<S>,
    OpsState: FromRef<S>,
    Arc<Inference>: FromRef<S>,
    CodeState: FromRef<S>,
    crate::server::video::VideoState: FromRef<S>,
{
    use crate::server::auth::Routes;
    let reads = OpenApiRouter::new()
        .routes(routes!(models::list))
        .routes(routes!(models::one))
        .routes(routes!(super::ops::metrics_json));
    let inference = OpenApiRouter::new()
        .routes(routes!(chat::chat))
        .routes(routes!(completions::completions))
        .routes(routes!(tokenize::tokenize))
        .routes(routes!(tokenize::detokenize));
    // Any other `/v1` path is a 501 for any key (it does nothing).
    let rest = OpenApiRouter::new().route("/{*rest}", any(not_implemented));
    Routes::read(reads)
        .merge(Routes::user(inference))
        .merge(responses::routes())
        .merge(super::embeddings::openai_routes())
        .merge(super::skills::openai_routes())
        .merge(super::video::openai_routes())
        .merge(Routes::read(rest))
}

async fn not_implemented(Path(rest): Path<String>) -> Response {
    ApiError::not_implemented(format!("/v1/{rest} is not implemented by this server")).openai()
}
