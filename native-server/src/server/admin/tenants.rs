//! `/api/v1/tenants`: groups of keys sharing a model allow-list and a token quota, enforced
//! when a model is leased (`server/inference/admission.rs`). The quota is a total of prompt +
//! completion tokens, not a period: `PATCH` with `reset_usage` starts the count again.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use weft_storage::{NewTenant, Tenant, TenantPatch};

use super::common::{changed, check_name, Changed, List};
use crate::server::admin::AdminState;
use crate::server::auth::RouterState;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::extract::ApiJson;
use axum::extract::FromRef;

pub fn routes<S: RouterState>() -> OpenApiRouter<S>
where
    AdminState: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, patch))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TenantInfo {
    pub id: String,
    pub name: String,
    /// Models the tenant may use; `null`: every model.
    pub models: Option<Vec<String>>,
    /// Tokens the tenant may use; `null`: unlimited.
    pub token_quota: Option<i64>,
    /// Prompt + completion tokens the tenant's keys used since the last reset.
    pub tokens_used: i64,
    pub created_at: i64,
}

impl From<Tenant> for TenantInfo {
    fn from(t: Tenant) -> Self {
        TenantInfo {
            id: t.id,
            name: t.name,
            models: t.models,
            token_quota: t.token_quota,
            tokens_used: t.tokens_used,
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
async fn list(State(st): State<AdminState>) -> Result<Json<List<TenantInfo>>, PlainError> {
    let data = st.storage.list_tenants().await?;
    Ok(Json(List {
        data: data.into_iter().map(TenantInfo::from).collect(),
    }))
}

#[utoipa::path(post, path = "/tenants", tag = "admin", request_body = CreateTenant,
    responses((status = 201, body = TenantInfo), (status = 400, body = PlainErrorBody),
              (status = 409, body = PlainErrorBody)))]
async fn create(
    State(st): State<AdminState>,
    ApiJson(b): ApiJson<CreateTenant>,
) -> Changed<TenantInfo> {
    let name = check_name("tenant", &b.name)?;
    check_models(b.models.as_deref())?;
    let token_quota = b.token_quota.map(quota).transpose()?;
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
    State(st): State<AdminState>,
    Path(id): Path<String>,
) -> Result<Json<TenantInfo>, PlainError> {
    Ok(Json(st.storage.get_tenant(&id).await?.into()))
}

fn check_models(models: Option<&[String]>) -> Result<(), ApiError> {
    if models.is_some_and(|ms| ms.iter().any(|m| m.trim().is_empty())) {
        return Err(ApiError::invalid("models must not contain empty names"));
    }
    Ok(())
}

fn quota(q: u64) -> Result<i64, ApiError> {
    i64::try_from(q).map_err(|_| ApiError::invalid("token_quota is too large"))
}

/// Reads a field that may be absent (leave as is) or `null` (clear it).
fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A partial update: absent fields stay; `models` or `token_quota` set to `null` are cleared
/// (every model, no quota).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchTenant {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<Vec<String>>)]
    pub models: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<u64>)]
    pub token_quota: Option<Option<u64>>,
    /// `true`: set `tokens_used` back to 0 (the quota counts again from now).
    #[serde(default)]
    pub reset_usage: bool,
}

#[utoipa::path(patch, path = "/tenants/{id}", tag = "admin", request_body = PatchTenant,
    params(("id" = String, Path, description = "The tenant's id")),
    responses((status = 200, body = TenantInfo), (status = 400, body = PlainErrorBody),
              (status = 404, body = PlainErrorBody), (status = 409, body = PlainErrorBody)))]
async fn patch(
    State(st): State<AdminState>,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<PatchTenant>,
) -> Changed<TenantInfo> {
    let name = b
        .name
        .as_deref()
        .map(|n| check_name("tenant", n))
        .transpose()?;
    check_models(b.models.as_ref().and_then(|m| m.as_deref()))?;
    let token_quota = match b.token_quota {
        Some(Some(q)) => Some(Some(quota(q)?)),
        Some(None) => Some(None),
        None => None,
    };
    let t = st
        .storage
        .patch_tenant(
            &id,
            TenantPatch {
                name,
                models: b.models,
                token_quota,
                reset_usage: b.reset_usage,
            },
        )
        .await?;
    let details = json!({"tenant_id": t.id, "reset_usage": b.reset_usage});
    changed(StatusCode::OK, details, TenantInfo::from(t))
}
