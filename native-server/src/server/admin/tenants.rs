//! `/api/v1/tenants`: groups of keys and users sharing a model allow-list and a token quota.
//! The allow-list and quota are stored and shown; enforcing them on inference is not done yet.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use weft_storage::{NewTenant, Tenant};

use super::common::{changed, check_name, Changed, List};
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::extract::ApiJson;
use crate::server::state::Shared;

pub fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TenantInfo {
    pub id: String,
    pub name: String,
    /// Models the tenant may use; `null`: every model.
    pub models: Option<Vec<String>>,
    /// Tokens the tenant may use; `null`: unlimited.
    pub token_quota: Option<i64>,
    pub created_at: i64,
}

impl From<Tenant> for TenantInfo {
    fn from(t: Tenant) -> Self {
        TenantInfo {
            id: t.id,
            name: t.name,
            models: t.models,
            token_quota: t.token_quota,
            created_at: t.created_at,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTenant {
    pub name: String,
    pub models: Option<Vec<String>>,
    pub token_quota: Option<u64>,
}

#[utoipa::path(get, path = "/tenants", tag = "admin",
    responses((status = 200, body = List<TenantInfo>), (status = 403, body = PlainErrorBody)))]
async fn list(State(st): State<Shared>) -> Result<Json<List<TenantInfo>>, PlainError> {
    let data = st.storage.list_tenants().await?;
    Ok(Json(List {
        data: data.into_iter().map(TenantInfo::from).collect(),
    }))
}

#[utoipa::path(post, path = "/tenants", tag = "admin", request_body = CreateTenant,
    responses((status = 201, body = TenantInfo), (status = 400, body = PlainErrorBody),
              (status = 409, body = PlainErrorBody)))]
async fn create(
    State(st): State<Shared>,
    ApiJson(b): ApiJson<CreateTenant>,
) -> Changed<TenantInfo> {
    let name = check_name("tenant", &b.name)?;
    if let Some(ms) = &b.models {
        if ms.iter().any(|m| m.trim().is_empty()) {
            return Err(ApiError::invalid("models must not contain empty names").into());
        }
    }
    let token_quota = b
        .token_quota
        .map(|q| i64::try_from(q).map_err(|_| ApiError::invalid("token_quota is too large")))
        .transpose()?;
    let t = st
        .storage
        .create_tenant(NewTenant {
            name,
            models: b.models,
            token_quota,
        })
        .await?;
    let details = json!({"tenant_id": t.id, "name": t.name});
    changed(StatusCode::CREATED, details, TenantInfo::from(t))
}

#[utoipa::path(get, path = "/tenants/{id}", tag = "admin",
    params(("id" = String, Path, description = "The tenant's id")),
    responses((status = 200, body = TenantInfo), (status = 404, body = PlainErrorBody)))]
async fn get_one(
    State(st): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<TenantInfo>, PlainError> {
    Ok(Json(st.storage.get_tenant(&id).await?.into()))
}
