//! `POST /api/v1/restart`: a graceful restart. The reply (202) comes first; then `weft serve`
//! stops accepting connections, lets requests in flight finish (streams included) for at
//! most [`DRAIN`], and re-executes its own binary with the same arguments and environment
//! (on the port it had, if it was given port 0), so new code and a clean state come up on the
//! same address. See `cli/serve.rs`.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::common::{changed, Changed};
use crate::server::admin::AdminState;
use crate::server::auth::RouterState;
use crate::server::error::PlainErrorBody;
use axum::extract::FromRef;

/// Longest wait for requests in flight before the restart goes ahead without them.
pub const DRAIN: Duration = Duration::from_secs(60);

pub fn routes<S: RouterState>() -> OpenApiRouter<S>
where
    AdminState: FromRef<S>,
{
    OpenApiRouter::new().routes(routes!(restart))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Restarting {
    /// `restarting`.
    pub status: &'static str,
    /// Longest wait for requests in flight, in seconds.
    pub drain_timeout_secs: u64,
}

/// Restarts the server gracefully: in-flight requests finish, then the process re-executes.
#[utoipa::path(post, path = "/restart", tag = "admin",
    responses((status = 202, body = Restarting), (status = 403, body = PlainErrorBody)))]
async fn restart(State(st): State<AdminState>) -> Changed<Restarting> {
    // A second request while draining changes nothing.
    let again = st.restart.send_replace(true);
    tracing::info!("restart requested: draining requests in flight");
    changed(
        StatusCode::ACCEPTED,
        json!({"already_restarting": again}),
        Restarting {
            status: "restarting",
            drain_timeout_secs: DRAIN.as_secs(),
        },
    )
}
