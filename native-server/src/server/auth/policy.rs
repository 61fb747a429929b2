//! Which role a route needs. One table for the whole server, so a new route is covered
//! without touching its handler:
//!
//! - public: `/health`, `/ready`, `GET /api/v1/about`, the OpenAPI document, the static files
//!   of the chat page (`/`, `/chat/…`) and of the in-browser page (`/play/…`): they hold no
//!   data, and the chat page asks for a key when its API calls answer 401;
//! - admin: everything under `/api/v1`, and the routes that change the model store or the
//!   installed skills (Ollama's create, copy, delete, pull, push, blobs; skill install/remove);
//! - read: `GET`/`HEAD` on any other route (a `readonly` key);
//! - use: any other method on any other route: inference (a `user` key).

use axum::http::Method;

/// What a request needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Need {
    Public,
    Read,
    Use,
    Admin,
}

/// A key's role; each includes what the one before it may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Readonly,
    User,
    Admin,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "readonly" => Some(Role::Readonly),
            "user" => Some(Role::User),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Readonly => "readonly",
            Role::User => "user",
            Role::Admin => "admin",
        }
    }

    /// Whether this role may make a request that needs `need`.
    pub fn allows(self, need: Need) -> bool {
        match need {
            Need::Public | Need::Read => true,
            Need::Use => self >= Role::User,
            Need::Admin => self == Role::Admin,
        }
    }
}

const STORE_CHANGES: &[&str] = &[
    "/api/create",
    "/api/copy",
    "/api/delete",
    "/api/pull",
    "/api/push",
];

/// A static file of the chat page or the in-browser page.
fn is_page(path: &str) -> bool {
    ["/play", "/chat"].contains(&path)
        || path == "/"
        || path.starts_with("/play/")
        || path.starts_with("/chat/")
}

/// What `method path` needs.
pub fn need(method: &Method, path: &str) -> Need {
    let read = method == Method::GET || method == Method::HEAD;
    if matches!(
        path,
        "/health" | "/ready" | "/openapi.json" | "/api/login" | "/api/logout"
    ) || (read && (path == "/api/v1/about" || is_page(path)))
    {
        return Need::Public;
    }
    if path == "/api/v1" || path.starts_with("/api/v1/") {
        return Need::Admin;
    }
    if STORE_CHANGES.contains(&path)
        || path.starts_with("/api/blobs/")
        || (!read && path.split('/').any(|seg| seg == "skills"))
    {
        return Need::Admin;
    }
    if read {
        Need::Read
    } else {
        Need::Use
    }
}

/// Whether a request changes admin state and so is audited.
pub fn audited(method: &Method, path: &str) -> bool {
    let read = method == Method::GET || method == Method::HEAD || method == Method::OPTIONS;
    // A backup download carries every key and password hash: who took one is recorded too.
    (!read && need(method, path) == Need::Admin)
        || (method == Method::GET && path == "/api/v1/backup")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_map_to_needs() {
        assert_eq!(need(&Method::GET, "/health"), Need::Public);
        assert_eq!(need(&Method::GET, "/api/v1/about"), Need::Public);
        assert_eq!(need(&Method::GET, "/"), Need::Public);
        assert_eq!(need(&Method::GET, "/chat/chat.js"), Need::Public);
        assert_eq!(need(&Method::POST, "/"), Need::Use);
        assert_eq!(need(&Method::GET, "/api/models"), Need::Read);
        assert_eq!(need(&Method::POST, "/api/v1/about"), Need::Admin);
        assert_eq!(need(&Method::GET, "/api/v1/keys"), Need::Admin);
        assert_eq!(need(&Method::GET, "/v1/models"), Need::Read);
        assert_eq!(need(&Method::POST, "/v1/chat/completions"), Need::Use);
        assert_eq!(need(&Method::DELETE, "/api/delete"), Need::Admin);
        assert_eq!(need(&Method::POST, "/api/skills"), Need::Admin);
        assert_eq!(need(&Method::GET, "/api/skills"), Need::Read);
        assert!(Role::User.allows(Need::Use) && !Role::User.allows(Need::Admin));
        assert!(Role::Readonly.allows(Need::Read) && !Role::Readonly.allows(Need::Use));
        assert!(audited(&Method::POST, "/api/v1/keys"));
        assert!(!audited(&Method::GET, "/api/v1/keys"));
    }
}
