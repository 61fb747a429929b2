//! Who is asking, as an extractor handlers take by value (never read from an ambient
//! task-local), and the one rule for stored things: each records its owner, and only that
//! owner sees it. Another principal gets the same 404 as for an id that does not exist, so
//! existence is not revealed; admins may list everyone's things only with an explicit filter.

use axum::extract::{FromRequestParts, OriginalUri};
use axum::http::request::Parts;
use axum::response::Response;

use super::policy::Role;
use super::Principal;
use crate::server::error::ApiError;

/// The principal of the request (the auth layer put it in the request's extensions).
#[derive(Clone, Debug)]
pub struct Caller(pub Principal);

impl Caller {
    /// The owner recorded on what this caller stores: the key id, `env` for
    /// `WEFT_ADMIN_KEY`, `open` for the one local principal of open mode.
    pub fn owner(&self) -> &str {
        &self.0.actor
    }

    pub fn is_admin(&self) -> bool {
        self.0.role == Role::Admin
    }

    /// Whether this caller may read, change or delete a thing owned by `owner`. Admins too
    /// see only their own things here: reaching everyone's is a separate, explicit listing.
    pub fn owns(&self, owner: &str) -> bool {
        self.owner() == owner
    }

    /// `Ok` when the caller owns it; else the 404 a missing `what` gets.
    pub fn check_owner(&self, owner: &str, what: impl FnOnce() -> String) -> Result<(), ApiError> {
        if self.owns(owner) {
            Ok(())
        } else {
            Err(ApiError::not_found(what()))
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        if let Some(p) = parts.extensions.get::<Principal>() {
            return Ok(Caller(p.clone()));
        }
        // Only a route declared public has no principal, and such a route takes none.
        let path = parts
            .extensions
            .get::<OriginalUri>()
            .map_or(parts.uri.path(), |u| u.0.path())
            .to_string();
        Err(ApiError::unauthorized("this route needs an API key").for_path(&path))
    }
}
