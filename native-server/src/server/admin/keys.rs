//! `GET/POST /api/v1/keys`, `DELETE /api/v1/keys/{id}`: API keys. The key itself appears once,
//! in the creation response; listings show its first characters only.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use weft_storage::{ApiKey, NewKey};

use super::common::{changed, check_name, check_role, check_tenant, Changed, List, TimeInput};
use crate::server::admin::AdminState;
use crate::server::auth::secret;
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
        .routes(routes!(revoke))
}

/// A key as listed: never the key or its hash.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyInfo {
    pub id: String,
    pub name: String,
    pub role: String,
    /// The key's first characters.
    pub prefix: String,
    pub tenant: Option<String>,
    pub rate_limit_rpm: Option<i64>,
    pub tokens_per_minute: Option<i64>,
    /// Unix seconds.
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
    pub last_used_at: Option<i64>,
}

impl From<ApiKey> for KeyInfo {
    fn from(k: ApiKey) -> Self {
        KeyInfo {
            id: k.id,
            name: k.name,
            role: k.role,
            prefix: k.prefix,
            tenant: k.tenant,
            rate_limit_rpm: k.rate_limit_rpm,
            tokens_per_minute: k.tokens_per_minute,
            created_at: k.created_at,
            expires_at: k.expires_at,
            revoked_at: k.revoked_at,
            last_used_at: k.last_used_at,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    pub name: String,
    /// `admin`, `user` or `readonly`.
    pub role: String,
    /// Unix seconds or RFC 3339; must be in the future.
    pub expires_at: Option<TimeInput>,
    /// The tenant (id) whose limits apply.
    pub tenant: Option<String>,
    /// Requests per minute this key may make (per server process).
    pub rate_limit_rpm: Option<u32>,
    /// Prompt + completion tokens per minute this key may use (per server process).
    pub tokens_per_minute: Option<u32>,
}

/// The creation response: the only time `key` is shown.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedKey {
    pub id: String,
    pub name: String,
    pub role: String,
    /// The secret: store it now, it cannot be shown again.
    pub key: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub tenant: Option<String>,
    pub rate_limit_rpm: Option<i64>,
    pub tokens_per_minute: Option<i64>,
}

/// A key's limits per minute.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    pub rpm: Option<u32>,
    pub tpm: Option<u32>,
}

/// Makes, hashes and stores a key; returns the stored row and the key.
pub async fn make_key(
    storage: &weft_storage::Storage,
    name: String,
    role: &str,
    expires_at: Option<i64>,
    tenant: Option<String>,
    limits: Limits,
) -> Result<(ApiKey, String), ApiError> {
    let key = secret::generate()
        .map_err(|e| ApiError::internal(format!("the OS random generator failed: {e}")))?;
    let row = storage
        .create_key(NewKey {
            name,
            role: role.to_string(),
            hash: secret::hash(&key),
            prefix: secret::shown_prefix(&key),
            tenant,
            rate_limit_rpm: limits.rpm.map(i64::from),
            tokens_per_minute: limits.tpm.map(i64::from),
            expires_at,
        })
        .await?;
    Ok((row, key))
}

/// Every key (revoked and expired ones too), without secrets.
#[utoipa::path(get, path = "/keys", tag = "admin",
    responses((status = 200, body = List<KeyInfo>), (status = 401, body = PlainErrorBody),
              (status = 403, body = PlainErrorBody)))]
async fn list(State(st): State<AdminState>) -> Result<Json<List<KeyInfo>>, PlainError> {
    let data = st.storage.list_keys().await?;
    Ok(Json(List {
        data: data.into_iter().map(KeyInfo::from).collect(),
    }))
}

/// Creates a key and shows it once.
#[utoipa::path(post, path = "/keys", tag = "admin", request_body = CreateKey,
    responses((status = 201, body = CreatedKey), (status = 400, body = PlainErrorBody),
              (status = 409, body = PlainErrorBody)))]
async fn create(
    State(st): State<AdminState>,
    ApiJson(b): ApiJson<CreateKey>,
) -> Changed<CreatedKey> {
    let name = check_name("key", &b.name)?;
    let role = check_role(&b.role)?;
    let expires_at = b
        .expires_at
        .as_ref()
        .map(|t| t.seconds("expires_at"))
        .transpose()?;
    if expires_at.is_some_and(|t| t <= weft_storage::now()) {
        return Err(ApiError::invalid("expires_at must be in the future").into());
    }
    if b.rate_limit_rpm == Some(0) {
        return Err(
            ApiError::invalid("rate_limit_rpm must be at least 1 (omit it for no limit)").into(),
        );
    }
    if b.tokens_per_minute == Some(0) {
        return Err(ApiError::invalid(
            "tokens_per_minute must be at least 1 (omit it for no limit)",
        )
        .into());
    }
    check_tenant(&st.storage, b.tenant.as_deref()).await?;
    let (row, key) = make_key(
        &st.storage,
        name,
        role.as_str(),
        expires_at,
        b.tenant,
        Limits {
            rpm: b.rate_limit_rpm,
            tpm: b.tokens_per_minute,
        },
    )
    .await?;
    let details = json!({"key_id": row.id, "name": row.name, "role": row.role});
    changed(
        StatusCode::CREATED,
        details,
        CreatedKey {
            id: row.id,
            name: row.name,
            role: row.role,
            key,
            created_at: row.created_at,
            expires_at: row.expires_at,
            tenant: row.tenant,
            rate_limit_rpm: row.rate_limit_rpm,
            tokens_per_minute: row.tokens_per_minute,
        },
    )
}

/// Revokes a key: it stops working at once and stays listed with `revoked_at`.
#[utoipa::path(delete, path = "/keys/{id}", tag = "admin",
    params(("id" = String, Path, description = "The key's id")),
    responses((status = 200, body = KeyInfo), (status = 404, body = PlainErrorBody)))]
async fn revoke(State(st): State<AdminState>, Path(id): Path<String>) -> Changed<KeyInfo> {
    let k = st.storage.revoke_key(&id).await?;
    changed(StatusCode::OK, json!({"key_id": k.id}), KeyInfo::from(k))
}
