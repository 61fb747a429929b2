//! The admin plane, under `/api/v1` (the reference peer's routes). Models for now; keys, users,
//! tenants, settings and the rest come as further folders of handlers here.

mod models;
pub mod types;

use utoipa_axum::router::OpenApiRouter;

use super::state::Shared;

/// Routes relative to `/api/v1`.
pub fn routes() -> OpenApiRouter<Shared> {
    models::routes()
}

/// The chat UI's `POST /api/models/load` (relative to `/api`), which loads like the admin route.
pub fn ui_routes() -> OpenApiRouter<Shared> {
    models::ui_routes()
}
