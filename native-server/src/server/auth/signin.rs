//! Signed-in browsers: the session cookie, the sign-in sessions it names
//! ([`sessions`](super::signins)) and the CSRF token a state change on it must carry. The auth
//! layer reads the principal from here; `server/login/` is the sign-in routes.

use axum::http::{header, HeaderMap};
use subtle::ConstantTimeEq;
use weft_storage::{Storage, StorageError};

use super::policy::Role;
use super::signins as sessions;
use super::Principal;
use crate::server::error::ApiError;

pub use super::signins::{create, get, remove, LIFETIME};

/// The session cookie's name.
pub const COOKIE: &str = "weft_session";
/// The header a signed-in page sends its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The session token in the request's `Cookie` header(s).
pub fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

/// The principal of a request's session cookie: None when it carries an `Authorization`
/// header (keys win), no cookie, or one of no live session or no existing user.
pub async fn principal(
    storage: &Storage,
    headers: &HeaderMap,
) -> Result<Option<Principal>, ApiError> {
    if headers.contains_key(header::AUTHORIZATION) {
        return Ok(None);
    }
    let Some(s) = cookie_token(headers).and_then(sessions::get) else {
        return Ok(None);
    };
    let user = match storage.get_user(&s.user_id).await {
        Ok(u) => u,
        Err(StorageError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let Some(role) = Role::parse(&user.role) else {
        return Ok(None);
    };
    Ok(Some(Principal {
        actor: format!("user:{}", user.id),
        role,
        tenant: user.tenant,
        tokens_per_minute: None,
    }))
}

/// Refuses a state change that rides a session cookie without its CSRF token. Requests with
/// an `Authorization` header, without a live session cookie, and the sign-in itself pass
/// (they are not acting as a signed-in browser).
pub fn check_csrf(path: &str, headers: &HeaderMap) -> Result<(), String> {
    if path == "/api/login" || headers.contains_key(header::AUTHORIZATION) {
        return Ok(());
    }
    let Some(s) = cookie_token(headers).and_then(sessions::get) else {
        return Ok(());
    };
    let sent = headers
        .get(CSRF_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if bool::from(sent.ct_eq(s.csrf.as_bytes())) {
        Ok(())
    } else {
        Err(format!(
            "this request rides a sign-in cookie without its CSRF token: send the csrfToken \
             from POST /api/login (or GET /api/login) as the {CSRF_HEADER} header"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            "a=1; weft_session=tok; b=2".parse().unwrap(),
        );
        assert_eq!(cookie_token(&h), Some("tok"));
        h.insert(header::COOKIE, "weft_session_x=1".parse().unwrap());
        assert_eq!(cookie_token(&h), None);
    }

    #[test]
    fn state_changes_on_a_cookie_need_its_csrf_token() {
        let (token, csrf) = sessions::create("u_csrf").unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("{COOKIE}={token}").parse().unwrap());
        assert!(check_csrf("/api/ui/chat", &h).is_err());
        assert!(check_csrf("/api/login", &h).is_ok());
        h.insert(CSRF_HEADER, "wrong".parse().unwrap());
        assert!(check_csrf("/api/ui/chat", &h).is_err());
        h.insert(CSRF_HEADER, csrf.parse().unwrap());
        assert!(check_csrf("/api/ui/chat", &h).is_ok());
        // A stale cookie is no session: nothing to protect, and auth will not accept it.
        sessions::remove(&token);
        h.remove(CSRF_HEADER);
        assert!(check_csrf("/api/ui/chat", &h).is_ok());
    }
}
