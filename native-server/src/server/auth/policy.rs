//! What a route group may need, what a key's role allows, and which requests are audited.
//! Which route needs what is not here: each group declares it where it is mounted
//! ([`super::Routes`]); see the module comment of `auth`.

use axum::http::Method;

/// What a route group needs (declared where it is mounted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Need {
    /// No key: `/health`, `/ready`, the OpenAPI document, `GET /api/v1/about`, static pages.
    Public,
    /// A `readonly` key or better: reads on the inference side (lists, shows, downloads).
    Read,
    /// A `user` key or better: inference, chat-UI sessions, uploads.
    Use,
    /// An `admin` key: the admin plane, model-store changes, skill install/remove.
    Admin,
    /// `GET /metrics`: [`Need::Read`], or [`Need::Public`] while the `metrics_public`
    /// setting is on (so a scraper needs no key).
    Metrics,
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

    /// Whether this role may make a request that needs `need` ([`Need::Metrics`] already
    /// resolved to `Read` or `Public` by the caller; as given it counts as `Read`).
    pub fn allows(self, need: Need) -> bool {
        match need {
            Need::Public | Need::Read | Need::Metrics => true,
            Need::Use => self >= Role::User,
            Need::Admin => self == Role::Admin,
        }
    }
}

/// Whether a request is written to the audit log: `need` is what its route declared
/// (`None`: no route declared one, e.g. a path no route serves). The auth layer calls this
/// once per request, so changing which requests are audited is a change here only.
pub fn audited(method: &Method, path: &str, need: Option<Need>) -> bool {
    let read = method == Method::GET || method == Method::HEAD || method == Method::OPTIONS;
    // A backup download carries every key and password hash: who took one is recorded too.
    (!read && need == Some(Need::Admin))
        || (method == Method::GET && need == Some(Need::Admin) && path == "/api/v1/backup")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_includes_the_one_below() {
        use Need::*;
        let table = [
            (Role::Readonly, [true, true, false, false, true]),
            (Role::User, [true, true, true, false, true]),
            (Role::Admin, [true, true, true, true, true]),
        ];
        for (role, allowed) in table {
            for (need, ok) in [Public, Read, Use, Admin, Metrics].into_iter().zip(allowed) {
                assert_eq!(role.allows(need), ok, "{role:?} {need:?}");
            }
        }
        for r in [Role::Readonly, Role::User, Role::Admin] {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("root"), None);
    }

    #[test]
    fn admin_changes_and_backups_are_audited() {
        assert!(audited(&Method::POST, "/api/v1/keys", Some(Need::Admin)));
        assert!(audited(&Method::DELETE, "/api/delete", Some(Need::Admin)));
        assert!(audited(&Method::GET, "/api/v1/backup", Some(Need::Admin)));
        assert!(!audited(&Method::GET, "/api/v1/keys", Some(Need::Admin)));
        assert!(!audited(
            &Method::POST,
            "/v1/chat/completions",
            Some(Need::Use)
        ));
        // A path no route serves declares nothing, so it writes no row.
        assert!(!audited(&Method::POST, "/api/v1/nothing-here", None));
    }
}
