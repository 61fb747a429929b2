//! `GET /api/v1/audit?limit=N`: the newest audit rows (admin changes: who, what, when, from
//! where), newest first.

use axum::extract::{Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::common::List;
use crate::server::admin::AdminState;
use crate::server::auth::RouterState;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use axum::extract::FromRef;

pub fn routes<S: RouterState>() -> OpenApiRouter<S>
where
    AdminState: FromRef<S>,
{
    OpenApiRouter::new().routes(routes!(list))
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct AuditQuery {
    /// Rows to return, 1 to 1000 (default 100).
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditRow {
    pub id: i64,
    /// Unix seconds.
    pub at: i64,
    /// A key id, `env` or `open`.
    pub actor: String,
    pub method: String,
    pub route: String,
    pub status: i64,
    pub remote: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub details: Option<Value>,
}

#[utoipa::path(get, path = "/audit", tag = "admin", params(AuditQuery),
    responses((status = 200, body = List<AuditRow>), (status = 400, body = PlainErrorBody)))]
async fn list(
    State(st): State<AdminState>,
    q: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<List<AuditRow>>, PlainError> {
    let q = q.map_err(|e| ApiError::invalid(e.body_text()))?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid("limit must be 1 to 1000").into());
    }
    let rows = st.storage.recent_audit(limit).await?;
    Ok(Json(List {
        data: rows
            .into_iter()
            .map(|a| AuditRow {
                id: a.id,
                at: a.at,
                actor: a.actor,
                method: a.method,
                route: a.route,
                status: a.status,
                remote: a.remote,
                details: a.details,
            })
            .collect(),
    }))
}
