//! The HTTP server. Each API surface is a folder of thin handlers over typed serde
//! request/response structs, nested under its own prefix:
//!
//! - `openai/` under `/v1`; `ollama/`, `ui/` (chat-UI protocol) and `admin/` (`/api/v1`) under
//!   `/api`, assembled in `api.rs`, which also decides `/api/chat`'s double meaning;
//! - `ops/` (`/health`, `/ready`, `/metrics`) and `web/` (the in-browser page, model
//!   downloads) at the root.
//!
//! `site/` is the layer in front of auth that keeps web pages from driving the server (`Host`,
//! `Origin`, body types, CORS, the CSRF token of a `login/` cookie). `auth/` decides who may call what: each surface's `routes()` declares its groups' roles
//! (`auth::Routes`), and one layer on the whole router authenticates API keys, applies
//! per-key rate limits and audits admin changes; persistent state (keys, users, tenants, settings, audit) is in the
//! `weft-storage` crate (SQLite or Postgres). `request_log/` wraps every request (outside
//! auth): its context (key id, model, tokens, moderation rules) and the event it sends to
//! `/api/v1/logs/stream` when it ends; `moderation/` checks input and output against the rules.
//!
//! They all translate to one internal request ([`generate::GenRequest`]) and read one event
//! stream; inference (batching, sampling, stop strings, prefix reuse) lives in
//! `weft_core::scheduler`. Shared pieces: `common/` (options, sampling, structured output,
//! tools), `skills/` (the skills registry on `/api` and `/v1`), `code/` (the sandbox, skills and
//! artifacts the server holds, and the artifact downloads), `jobs/` (model pull / import / quantize jobs, routed under `/api/v1` and Ollama's
//! `/api/pull`), `extract.rs` (JSON bodies rejected in the API's error shape), `error.rs` (one error
//! type, rendered per surface), `stream.rs` (SSE / NDJSON), `logging.rs` (request ids and
//! structured logs), `openapi.rs` (the generated document).

pub(crate) mod admin;
mod api;
pub mod auth;
mod builder;
mod clock;
pub mod code;
mod common;
mod config;
mod conversations;
mod embeddings;
mod error;
mod extract;
mod generate;
mod inference;
pub mod jobs;
mod leased;
pub mod logging;
mod login;
mod model_names;
mod moderation;
mod ollama;
mod openai;
mod openapi;
mod ops;
mod request_log;
mod serve;
mod site;
mod skills;
mod state;
mod stream;
mod ui;
pub mod uploads;
pub mod video;
mod web;

use std::sync::{Arc, OnceLock};

use axum::extract::{DefaultBodyLimit, FromRef, Request, State};
use axum::http::{HeaderValue, Method, Uri};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;

pub use builder::Builder;
pub use common::images::ImageLimits;
pub use common::sampling::{Precedence, SamplingFields};
pub use config::ServeConfig;
pub use error::ApiError;
pub use serve::{Exit, Server};
pub use site::SiteConfig;
pub use state::{AppState, Shared};

/// Every route, with the OpenAPI document, body limit, request ids and the backend header.
/// Every route comes from a [`auth::Routes`] group that declared what it needs (see `auth`).
pub(crate) fn router(state: Shared) -> Router {
    let doc = Arc::new(OnceLock::new());
    let (routes, openapi) = auth::Routes::with_openapi(openapi::base())
        .nest("/v1", openai::routes())
        .nest("/api", api::routes())
        .merge(ops::routes())
        .merge(uploads::root_routes())
        .merge(openapi::routes(doc.clone()))
        .merge(login::routes())
        .merge(web::routes())
        .fallback(auth::policy::Need::Public, no_route)
        .split_for_parts();
    let _ = doc.set(openapi);
    let app = routes
        .layer(DefaultBodyLimit::max(state.cfg.body_limit))
        .layer(middleware::from_fn_with_state(
            state.cfg.clone(),
            backend_header,
        ))
        .layer(middleware::from_fn_with_state(
            auth::AuthState::from_ref(&state),
            auth::layer,
        ))
        .layer(middleware::from_fn_with_state(
            state.cfg.site.clone(),
            site::layer,
        ))
        .layer(middleware::from_fn_with_state(
            request_log::LogState::from_ref(&state),
            request_log::layer,
        ))
        .with_state(state);
    logging::layer(app)
}

/// Any path no route serves: 404 with `{"error": "..."}` (`/v1` paths have their own 501).
async fn no_route(method: Method, uri: Uri) -> Response {
    ApiError::not_found(format!("no route for {method} {}", uri.path())).plain()
}

/// Names the backend that serves requests (`x-weft-backend: cpu`).
async fn backend_header(State(cfg): State<Arc<ServeConfig>>, req: Request, next: Next) -> Response {
    let mut r = next.run(req).await;
    if let Ok(v) = HeaderValue::from_str(&cfg.backend) {
        r.headers_mut().insert("x-weft-backend", v);
    }
    r
}

/// A short unique suffix for generated names.
pub fn new_id_suffix() -> String {
    weft_storage::new_id("x")[2..10].to_string()
}

/// Makes and stores an API key (for `weft keys create`); returns its id and the key.
pub async fn create_key(
    storage: &weft_storage::Storage,
    name: String,
    role: &str,
) -> Result<(String, String), ApiError> {
    if auth::policy::Role::parse(role).is_none() {
        return Err(ApiError::invalid(format!(
            "unknown role {role:?}: use admin, user or readonly"
        )));
    }
    let (row, key) =
        admin::keys::make_key(storage, name, role, None, None, Default::default()).await?;
    Ok((row.id, key))
}
