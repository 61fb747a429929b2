//! Signed-in browsers: a random session token (the cookie) → the user and the session's CSRF
//! token. Kept in this process's memory: a restart signs everyone out, and with several
//! replicas a browser needs sticky sessions (API clients use keys, which are shared).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;

/// How long a sign-in lasts.
pub const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Most sessions held at once (the oldest go first beyond it), so sign-ins cannot grow memory.
const MAX: usize = 10_000;

/// One signed-in browser.
#[derive(Clone, Debug)]
pub struct Session {
    pub user_id: String,
    pub csrf: String,
    expires: Instant,
}

static STORE: LazyLock<Mutex<HashMap<String, Session>>> = LazyLock::new(Default::default);

/// 32 random bytes, base64url.
fn random() -> std::io::Result<String> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b))
}

/// Only the token's hash is a map key, so a memory dump does not hand out live cookies.
fn key(token: &str) -> String {
    crate::server::auth::secret::hash(token)
}

/// Signs `user_id` in: (the cookie's token, the CSRF token).
pub fn create(user_id: &str) -> std::io::Result<(String, String)> {
    let (token, csrf) = (random()?, random()?);
    let now = Instant::now();
    let mut m = STORE.lock().unwrap_or_else(|e| e.into_inner());
    m.retain(|_, s| s.expires > now);
    while m.len() >= MAX {
        let Some(oldest) = m
            .iter()
            .min_by_key(|(_, s)| s.expires)
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        m.remove(&oldest);
    }
    m.insert(
        key(&token),
        Session {
            user_id: user_id.to_string(),
            csrf: csrf.clone(),
            expires: now + LIFETIME,
        },
    );
    Ok((token, csrf))
}

/// The live session of a cookie token.
pub fn get(token: &str) -> Option<Session> {
    let mut m = STORE.lock().unwrap_or_else(|e| e.into_inner());
    let k = key(token);
    match m.get(&k) {
        Some(s) if s.expires > Instant::now() => Some(s.clone()),
        Some(_) => {
            m.remove(&k);
            None
        }
        None => None,
    }
}

/// Signs a cookie token out.
pub fn remove(token: &str) {
    STORE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&key(token));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_found_by_token_only_until_removed() {
        let (t, csrf) = create("u_1").unwrap();
        assert_ne!(t, csrf);
        let s = get(&t).unwrap();
        assert_eq!(s.user_id, "u_1");
        assert_eq!(s.csrf, csrf);
        assert!(get(&csrf).is_none());
        remove(&t);
        assert!(get(&t).is_none());
    }
}
