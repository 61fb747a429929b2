//! `/api/v1/users`: people who administer or use the server. Passwords, which people choose
//! and so may be guessable, are stored only as argon2id hashes (memory-hard, salted), made on
//! a blocking thread because hashing takes tens of milliseconds by design.

use argon2::password_hash::PasswordHasher;
use argon2::Argon2;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use weft_storage::{NewUser, User, UserPatch};

use super::common::{changed, check_name, check_role, check_tenant, Changed, List};
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
        .routes(routes!(get_one, update, remove))
}

/// A user as listed (never the password or its hash).
#[derive(Debug, Serialize, ToSchema)]
pub struct UserInfo {
    pub id: String,
    pub name: String,
    pub role: String,
    pub tenant: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl From<User> for UserInfo {
    fn from(u: User) -> Self {
        UserInfo {
            id: u.id,
            name: u.name,
            role: u.role,
            tenant: u.tenant,
            created_at: u.created_at,
            updated_at: u.updated_at,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    pub name: String,
    /// 8 to 1024 characters.
    pub password: String,
    /// `admin`, `user` or `readonly`.
    pub role: String,
    pub tenant: Option<String>,
}

/// Fields to change; absent ones stay. `tenant: null` removes the tenant.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateUser {
    pub password: Option<String>,
    pub role: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub tenant: Option<Option<String>>,
}

/// Tells a field given as `null` (`Some(None)`) from an absent one (`None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(Option::deserialize(d)?))
}

/// An argon2id PHC string for a password (400 when it is too short or too long).
async fn hash_password(password: String) -> Result<String, ApiError> {
    let n = password.chars().count();
    if !(8..=1024).contains(&n) {
        return Err(ApiError::invalid("password must be 8 to 1024 characters"));
    }
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .hash_password(password.as_bytes())
            .map(|h| h.to_string())
            .map_err(|e| ApiError::internal(format!("hashing the password: {e}")))
    })
    .await
    .map_err(|e| ApiError::internal(format!("hashing the password: {e}")))?
}

#[utoipa::path(get, path = "/users", tag = "admin",
    responses((status = 200, body = List<UserInfo>), (status = 403, body = PlainErrorBody)))]
async fn list(State(st): State<AdminState>) -> Result<Json<List<UserInfo>>, PlainError> {
    let data = st.storage.list_users().await?;
    Ok(Json(List {
        data: data.into_iter().map(UserInfo::from).collect(),
    }))
}

#[utoipa::path(post, path = "/users", tag = "admin", request_body = CreateUser,
    responses((status = 201, body = UserInfo), (status = 400, body = PlainErrorBody),
              (status = 409, body = PlainErrorBody)))]
async fn create(
    State(st): State<AdminState>,
    ApiJson(b): ApiJson<CreateUser>,
) -> Changed<UserInfo> {
    let name = check_name("user", &b.name)?;
    let role = check_role(&b.role)?;
    check_tenant(&st.storage, b.tenant.as_deref()).await?;
    let password_hash = hash_password(b.password).await?;
    let u = st
        .storage
        .create_user(NewUser {
            name,
            role: role.as_str().to_string(),
            password_hash,
            tenant: b.tenant,
        })
        .await?;
    let details = json!({"user_id": u.id, "name": u.name, "role": u.role});
    changed(StatusCode::CREATED, details, UserInfo::from(u))
}

#[utoipa::path(get, path = "/users/{id}", tag = "admin",
    params(("id" = String, Path, description = "The user's id")),
    responses((status = 200, body = UserInfo), (status = 404, body = PlainErrorBody)))]
async fn get_one(
    State(st): State<AdminState>,
    Path(id): Path<String>,
) -> Result<Json<UserInfo>, PlainError> {
    Ok(Json(st.storage.get_user(&id).await?.into()))
}

#[utoipa::path(patch, path = "/users/{id}", tag = "admin", request_body = UpdateUser,
    params(("id" = String, Path, description = "The user's id")),
    responses((status = 200, body = UserInfo), (status = 400, body = PlainErrorBody),
              (status = 404, body = PlainErrorBody)))]
async fn update(
    State(st): State<AdminState>,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<UpdateUser>,
) -> Changed<UserInfo> {
    let role = b.role.as_deref().map(check_role).transpose()?;
    if let Some(Some(t)) = &b.tenant {
        check_tenant(&st.storage, Some(t)).await?;
    }
    // 404 before spending time on a hash.
    st.storage.get_user(&id).await?;
    let password_hash = match b.password {
        Some(p) => Some(hash_password(p).await?),
        None => None,
    };
    let changed_fields: Vec<&str> = [
        ("role", role.is_some()),
        ("password", password_hash.is_some()),
        ("tenant", b.tenant.is_some()),
    ]
    .iter()
    .filter(|(_, c)| *c)
    .map(|(f, _)| *f)
    .collect();
    let u = st
        .storage
        .update_user(
            &id,
            UserPatch {
                role: role.map(|r| r.as_str().to_string()),
                password_hash,
                tenant: b.tenant,
            },
        )
        .await?;
    let details = json!({"user_id": u.id, "changed": changed_fields});
    changed(StatusCode::OK, details, UserInfo::from(u))
}

#[utoipa::path(delete, path = "/users/{id}", tag = "admin",
    params(("id" = String, Path, description = "The user's id")),
    responses((status = 200, body = UserInfo), (status = 404, body = PlainErrorBody)))]
async fn remove(State(st): State<AdminState>, Path(id): Path<String>) -> Changed<UserInfo> {
    let u = st.storage.get_user(&id).await?;
    st.storage.delete_user(&id).await?;
    changed(StatusCode::OK, json!({"user_id": u.id}), UserInfo::from(u))
}
