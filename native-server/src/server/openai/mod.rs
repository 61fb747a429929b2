//! The OpenAI surface, nested under `/v1`: chat completions, completions, responses
//! (`responses/`), models, embeddings (`server/embeddings/`), tokenize/detokenize, metrics,
//! and a 501 in OpenAI's error shape for every other `/v1` path.

mod chat;
mod completions;
mod models;
mod request;
mod respond;
pub mod responses;
mod tokenize;
mod tool_loop;
pub mod types;

use axum::extract::Path;
use axum::response::Response;
use axum::routing::any;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use request::finish_reason;

use super::error::{ApiError, OpenAiError};
use super::state::Shared;

type Res = Result<Response, OpenAiError>;

/// Routes relative to `/v1`.
pub fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new()
        .routes(routes!(models::list))
        .routes(routes!(models::one))
        .routes(routes!(chat::chat))
        .routes(routes!(completions::completions))
        .routes(routes!(tokenize::tokenize))
        .routes(routes!(tokenize::detokenize))
        .routes(routes!(super::ops::metrics_json))
        .merge(responses::routes())
        .merge(super::embeddings::openai_routes())
        .merge(super::skills::openai_routes())
        .route("/{*rest}", any(not_implemented))
}

async fn not_implemented(Path(rest): Path<String>) -> Response {
    ApiError::not_implemented(format!("/v1/{rest} is not implemented by this server")).openai()
}
