//! The admin plane, under `/api/v1` (the reference peer's routes): models and model jobs
//! (`server/jobs/`), keys, users, tenants, settings, moderation rules (`server/moderation/`), the
//! request-log stream, the audit log, `about`, A/B tests, LoRA adapters, backup/restore and
//! restart. All need an admin key but `GET /about` (public), as `routes()` declares
//! (`server/auth/`); every change is audited by the auth layer.

mod ab;
mod about;
mod adapters;
mod audit;
mod backup;
pub mod common;
pub mod keys;
mod library;
mod logs;
mod models;
pub mod moderation_rules;
pub mod restart;
pub mod settings;
mod state;
mod tenants;
mod time;
pub mod types;
mod users;
use crate::server::auth::RouterState;
use axum::extract::FromRef;
pub use state::AdminState;

/// Routes relative to `/api/v1`: all admin, but `GET /about` (public: version and backend
/// discovery). The model jobs' and moderation rules' admin routes are mounted beside these
/// (`server/api.rs`).
pub fn routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    AdminState: FromRef<S>,
{
    use crate::server::auth::Routes;
    let admin = models::routes()
        .merge(ab::routes())
        .merge(adapters::routes())
        .merge(audit::routes())
        .merge(backup::routes())
        .merge(keys::routes())
        .merge(logs::routes())
        .merge(restart::routes())
        .merge(settings::routes())
        .merge(tenants::routes())
        .merge(users::routes());
    Routes::public(about::routes()).merge(Routes::admin(admin))
}

/// The chat UI's `POST /api/models/load` (relative to `/api`), which loads like the admin route.
pub fn ui_routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    AdminState: FromRef<S>,
{
    crate::server::auth::Routes::user(models::ui_routes())
}
