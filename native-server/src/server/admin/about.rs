//! `GET /api/v1/about` (public): what this server is, for discovery.

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::server::admin::AdminState;
use crate::server::auth::RouterState;
use crate::server::error::PlainError;
use axum::extract::FromRef;

pub fn routes<S: RouterState>() -> OpenApiRouter<S>
where
    AdminState: FromRef<S>,
{
    OpenApiRouter::new().routes(routes!(about))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct About {
    pub name: &'static str,
    pub version: &'static str,
    /// The inference backend (`cpu`, `wgpu`, `cuda`).
    pub backend: String,
    /// Where persistent state lives: `sqlite` or `postgres`.
    pub storage: &'static str,
    pub schema_version: i64,
    /// `keys` when requests need an API key, `open` while no key exists.
    pub auth: &'static str,
    pub uptime_secs: u64,
    pub loaded_models: Vec<String>,
}

/// Version, backend, storage and whether keys are required.
#[utoipa::path(get, path = "/about", tag = "admin", responses((status = 200, body = About)))]
async fn about(State(st): State<AdminState>) -> Result<Json<About>, PlainError> {
    let closed = st.auth.is_closed(&st.storage).await?;
    Ok(Json(About {
        name: "weft",
        version: env!("CARGO_PKG_VERSION"),
        backend: st.cfg.backend.clone(),
        storage: st.storage.backend(),
        schema_version: st.storage.schema_version(),
        auth: if closed { "keys" } else { "open" },
        uptime_secs: st.started.elapsed().as_secs(),
        loaded_models: st.registry.resident().into_iter().map(|r| r.name).collect(),
    }))
}
