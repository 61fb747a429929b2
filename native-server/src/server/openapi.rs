//! The OpenAPI 3.1 document, generated from the handlers' `#[utoipa::path]` annotations and the
//! request/response types as the routers are assembled, served at `GET /openapi.json`.

use std::sync::{Arc, OnceLock};

use axum::response::IntoResponse;
use axum::routing::get;
use axum::Json;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use super::auth::Routes;
use super::error::{ApiError, OpenAiErrorBody, PlainErrorBody};
use crate::server::auth::RouterState;

/// The document's fixed parts; the paths come from the routers.
#[derive(OpenApi)]
#[openapi(
    info(title = "Weft server", description = "OpenAI (/v1), Ollama (/api), chat-UI and admin (/api/v1) APIs over local models."),
    paths(super::code::artifact),
    components(schemas(OpenAiErrorBody, PlainErrorBody)),
    tags(
        (name = "openai", description = "OpenAI-compatible API under /v1"),
        (name = "ollama", description = "Ollama-compatible API under /api"),
        (name = "chat-ui", description = "The chat-UI protocol under /api"),
        (name = "admin", description = "The admin plane under /api/v1"),
        (name = "code", description = "Files written by server-side code execution (--code-exec)"),
        (name = "ops", description = "Health, readiness and metrics"),
        (name = "video", description = "Video generation under /api (a Wan model served)"),
    )
)]
pub struct ApiDoc;

/// The base document (info, shared schemas, tags).
pub fn base() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    doc
}

/// `GET /openapi.json` (public): the document, filled in once the router is assembled.
pub fn routes<S: RouterState>(doc: Arc<OnceLock<utoipa::openapi::OpenApi>>) -> Routes<S> {
    let serve = move || {
        let doc = doc.clone();
        async move {
            match doc.get() {
                Some(d) => Json(d.clone()).into_response(),
                None => ApiError::unavailable("the API document is not built yet").plain(),
            }
        }
    };
    Routes::public(OpenApiRouter::new().route("/openapi.json", get(serve)))
}
