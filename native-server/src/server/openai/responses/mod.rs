//! OpenAI's Responses API under `/v1/responses`: create (whole or streamed as typed events),
//! and the stored responses (retrieve, delete, input items), continued with
//! `previous_response_id`. Generation goes through the same pieces as chat completions
//! (the chat template, tool offering and parsing, structured output, the scheduler).

mod create;
mod input;
mod output;
mod retrieve;
pub mod store;
mod stream;
mod types;

use super::OpenAiState;
use crate::server::auth::RouterState;
use axum::extract::FromRef;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes relative to `/v1`.
pub fn routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    OpenAiState: FromRef<S>,
{
    use crate::server::auth::Routes;
    let reads = OpenApiRouter::new()
        .routes(routes!(retrieve::retrieve))
        .routes(routes!(retrieve::input_items));
    let changes = OpenApiRouter::new()
        .routes(routes!(create::create))
        .routes(routes!(retrieve::delete));
    Routes::read(reads).merge(Routes::user(changes))
}
