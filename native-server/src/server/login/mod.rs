//! Sign-in for people: a user (`/api/v1/users`) signs in to the web UI with their name and
//! password (checked against the argon2id hash) and gets an HttpOnly, SameSite=Strict session
//! cookie plus a CSRF token, which the page sends as `X-CSRF-Token` on every state change.
//! API clients keep bearer keys; a request with an `Authorization` header is never read as a
//! cookie session.
//!
//! - `POST /api/login` `{"name", "password"}` → 200 `{"user", "csrfToken"}` + `Set-Cookie`;
//!   401 for a wrong name or password (the same message and the same argon2 work either way);
//!   429 with `Retry-After` while the name or address is backing off ([`throttle`]).
//! - `GET /api/login` → the signed-in user and the CSRF token again (after a page reload), or
//!   401.
//! - `POST /api/logout` → 204 and the cookie cleared.
//!
//! The auth layer asks [`principal`] for a request's cookie session (actor `user:<id>`, the
//! user's role and tenant, read from the database on every request so a deleted user or a
//! changed role counts at once); the site layer asks [`check_csrf`] on state changes.

pub mod state;
pub mod throttle;

use std::net::{IpAddr, SocketAddr};

use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::Argon2;
use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use weft_storage::StorageError;

use super::auth::signin::{self as sessions, cookie_token, COOKIE};
use super::error::{ApiError, PlainError, PlainErrorBody};
use super::extract::ApiJson;
use crate::server::auth::RouterState;
use axum::extract::FromRef;
pub use state::LoginState;

pub fn routes<S: RouterState>() -> super::auth::Routes<S>
where
    LoginState: FromRef<S>,
{
    // Public: signing in is how a person without a key gets a principal; `whoami` and
    // `logout` read the cookie themselves.
    super::auth::Routes::public(
        OpenApiRouter::new()
            .routes(routes!(login, whoami))
            .routes(routes!(logout)),
    )
}

/// A sign-in.
#[derive(Debug, Deserialize, ToSchema)]
pub struct LoginRequest {
    pub name: String,
    pub password: String,
}

/// The signed-in user.
#[derive(Debug, Serialize, ToSchema)]
pub struct SignedInUser {
    pub id: String,
    pub name: String,
    pub role: String,
    pub tenant: Option<String>,
}

/// What a sign-in answers: who, and the token to send as `X-CSRF-Token`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoginResponse {
    pub user: SignedInUser,
    pub csrf_token: String,
}

/// The client's address (for the per-address backoff), when the server knows it.
pub struct Remote(Option<IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for Remote {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Remote(
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip()),
        ))
    }
}

fn wrong() -> ApiError {
    ApiError::unauthorized("wrong user name or password")
}

/// A hash of nothing anyone can sign in with, checked when the name is unknown so the answer
/// takes as long as for a known one.
fn decoy_hash() -> String {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY
        .get_or_init(|| {
            Argon2::default()
                .hash_password(b"no user has this password")
                .map(|h| h.to_string())
                .unwrap_or_default()
        })
        .clone()
}

/// Whether `password` matches the PHC string `hash` (on a blocking thread: argon2 is slow by
/// design).
async fn verify(password: String, hash: String) -> bool {
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .verify_password(password.as_bytes(), hash.as_str())
            .is_ok()
    })
    .await
    .unwrap_or(false)
}

#[utoipa::path(post, path = "/api/login", tag = "chat-ui", request_body = LoginRequest,
    responses((status = 200, body = LoginResponse), (status = 401, body = PlainErrorBody),
              (status = 429, body = PlainErrorBody)))]
async fn login(
    State(st): State<LoginState>,
    Remote(address): Remote,
    ApiJson(b): ApiJson<LoginRequest>,
) -> Result<Response, PlainError> {
    let name = b.name.trim();
    if name.is_empty() || name.len() > 256 || b.password.len() > 1024 {
        return Err(wrong().into());
    }
    let keys = throttle::keys(name, address);
    if let Some(secs) = throttle::wait(&keys) {
        return Err(ApiError::rate_limited(
            format!("too many failed sign-ins: try again in {secs} s"),
            u32::try_from(secs).unwrap_or(u32::MAX),
        )
        .into());
    }
    let stored = st.storage.user_password_hash(name).await?;
    let known = stored.is_some();
    let ok = verify(b.password, stored.unwrap_or_else(decoy_hash)).await && known;
    if !ok {
        throttle::fail(&keys);
        return Err(wrong().into());
    }
    throttle::succeed(&keys);
    let user = st
        .storage
        .list_users()
        .await?
        .into_iter()
        .find(|u| u.name == name)
        .ok_or_else(wrong)?;
    let (token, csrf) = sessions::create(&user.id)
        .map_err(|e| ApiError::internal(format!("the OS random generator failed: {e}")))?;
    let cookie = format!(
        "{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        sessions::LIFETIME.as_secs()
    );
    let body = LoginResponse {
        user: SignedInUser {
            id: user.id,
            name: user.name,
            role: user.role,
            tenant: user.tenant,
        },
        csrf_token: csrf,
    };
    let mut r = Json(body).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(r)
}

#[utoipa::path(get, path = "/api/login", tag = "chat-ui",
    responses((status = 200, body = LoginResponse), (status = 401, body = PlainErrorBody)))]
async fn whoami(State(st): State<LoginState>, headers: HeaderMap) -> Result<Response, PlainError> {
    let none = || ApiError::unauthorized("not signed in");
    let token = cookie_token(&headers).ok_or_else(none)?;
    let s = sessions::get(token).ok_or_else(none)?;
    let user = match st.storage.get_user(&s.user_id).await {
        Ok(u) => u,
        Err(StorageError::NotFound(_)) => return Err(none().into()),
        Err(e) => return Err(e.into()),
    };
    let body = LoginResponse {
        user: SignedInUser {
            id: user.id,
            name: user.name,
            role: user.role,
            tenant: user.tenant,
        },
        csrf_token: s.csrf,
    };
    let mut r = Json(body).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(r)
}

#[utoipa::path(post, path = "/api/logout", tag = "chat-ui",
    responses((status = 204, description = "Signed out; the cookie is cleared")))]
async fn logout(headers: HeaderMap) -> Response {
    if let Some(t) = cookie_token(&headers) {
        sessions::remove(t);
    }
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("weft_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
    );
    r
}
