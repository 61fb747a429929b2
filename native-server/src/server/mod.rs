//! The HTTP server: one adapter file per API surface (`openai`, `openai_completions`,
//! `ollama`, `ui`, `ops`), all translating to one internal request ([`generate::GenRequest`])
//! and reading one event stream. Inference (batching, sampling, stop strings, prefix reuse)
//! lives in `weft_core::scheduler`; this module is transport only.

mod admin_models;
mod body;
mod error;
mod generate;
pub mod jobs;
mod ollama;
mod ollama_models;
mod openai;
mod openai_completions;
mod openapi;
mod ops;
mod sampling;
mod state;
mod structured;
mod think;
mod tool_choice;
mod tools;
mod ui;
mod web;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, Method, Uri};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;

pub use error::ApiError;
pub use sampling::{Precedence, SamplingFields};
pub use state::{AppState, ServeConfig, Shared};

/// Every route, with the body limit and the backend header.
pub fn router(state: Shared) -> Router {
    Router::new()
        .merge(openai::routes())
        .merge(ollama::routes())
        .merge(ui::routes())
        .merge(ops::routes())
        .merge(admin_models::routes())
        .merge(web::routes())
        .fallback(no_route)
        .layer(DefaultBodyLimit::max(state.cfg.body_limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            backend_header,
        ))
        .with_state(state)
}

/// Any path no route serves: 404 with `{"error": "..."}` (`/v1` paths have their own 501).
async fn no_route(method: Method, uri: Uri) -> Response {
    ApiError::not_found(format!("no route for {method} {}", uri.path())).plain()
}

/// Names the backend that serves requests (`x-weft-backend: cpu`).
async fn backend_header(State(st): State<Shared>, req: Request, next: Next) -> Response {
    let mut r = next.run(req).await;
    if let Ok(v) = HeaderValue::from_str(&st.cfg.backend) {
        r.headers_mut().insert("x-weft-backend", v);
    }
    r
}

/// Shared state for a configuration.
pub fn state(cfg: ServeConfig, registry: Arc<crate::registry::Registry>) -> Shared {
    Arc::new(AppState::new(cfg, registry))
}
