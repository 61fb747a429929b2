//! The admin plane, under `/api/v1` (the reference peer's routes): models and model jobs
//! (`server/jobs/`), keys, users, tenants, settings, moderation rules (`server/moderation/`), the
//! request-log stream, the audit log, `about`, A/B tests, LoRA adapters, backup/restore and
//! restart. Who may call
//! them is decided by the auth layer (`server/auth/`), not here; every change is audited there.

mod ab;
mod about;
mod adapters;
mod audit;
mod backup;
pub mod common;
pub mod keys;
mod logs;
mod models;
pub mod restart;
pub mod settings;
mod tenants;
mod time;
pub mod types;
mod users;

use utoipa_axum::router::OpenApiRouter;

use super::state::Shared;

/// Routes relative to `/api/v1`.
pub fn routes() -> OpenApiRouter<Shared> {
    models::routes()
        .merge(super::jobs::admin_routes())
        .merge(about::routes())
        .merge(ab::routes())
        .merge(adapters::routes())
        .merge(audit::routes())
        .merge(backup::routes())
        .merge(keys::routes())
        .merge(logs::routes())
        .merge(crate::server::moderation::routes::routes())
        .merge(restart::routes())
        .merge(settings::routes())
        .merge(tenants::routes())
        .merge(users::routes())
}

/// The chat UI's `POST /api/models/load` (relative to `/api`), which loads like the admin route.
pub fn ui_routes() -> OpenApiRouter<Shared> {
    models::ui_routes()
}
