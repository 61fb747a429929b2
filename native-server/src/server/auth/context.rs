//! The one context of a request in flight: made by the request-log layer around everything
//! else, put in the request's extensions, and taken by handlers as an extractor
//! ([`RequestCtx`]). It is passed by value, never found ambiently: leasing a model takes it
//! (and the lease carries it, see `server::lease`), so prompt building moderates the input
//! with its rules and a generation is metered and filtered with it. Code that has no context
//! cannot lease a model for a request, so skipping moderation or metering is a type error,
//! not a silent pass.
//!
//! What it holds is filled in as the request goes through the layers: its id, method, route,
//! start time and moderation rules when it arrives; the key the auth layer accepted (its
//! actor, role, tenant and limits); the A/B arm the request was routed to; and the model and
//! token counts the generation layer adds as sequences finish. Tasks a handler spawns to serve
//! the request take a clone.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::Response;

use weft_storage::{Storage, Variant};

use super::usage::{Meter, Usage};
use super::Principal;
use crate::server::error::ApiError;
use crate::server::moderation::Screen;

/// Tokens counted for the request log.
#[derive(Default)]
pub struct Counted {
    pub model: Option<String>,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// One request in flight: a cheap handle (clones share the same request).
#[derive(Clone)]
pub struct RequestCtx(Arc<Inner>);

impl std::ops::Deref for RequestCtx {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

/// What [`RequestCtx`] holds.
pub struct Inner {
    pub id: String,
    pub method: String,
    pub route: String,
    pub start: Instant,
    /// Moderation for this request, when rules are in force.
    pub screen: Option<Screen>,
    /// The request's `X-Ab-Test-Id` header: route by this A/B test whatever the model says.
    pub ab_header: Option<String>,
    /// The key id (or `env` / `open`) the auth layer identified, even when it then refused it.
    actor: Mutex<Option<String>>,
    /// Who the request proceeds as, once the auth layer let it in.
    principal: Mutex<Option<Principal>>,
    /// The A/B test and arm the request was routed to (for the response's headers).
    ab: Mutex<Option<(String, Variant)>>,
    counted: Mutex<Counted>,
    /// Where a generation's tokens are counted against the key and tenant.
    meters: Option<(Arc<Usage>, Storage)>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RequestCtx {
    /// A new request's context (the request-log layer makes it; unit tests make theirs).
    pub fn new(id: String, method: String, route: String, screen: Option<Screen>) -> Self {
        Self::build(Inner {
            id,
            method,
            route,
            start: Instant::now(),
            screen,
            ab_header: None,
            actor: Mutex::new(None),
            principal: Mutex::new(None),
            ab: Mutex::new(None),
            counted: Mutex::new(Counted::default()),
            meters: None,
        })
    }

    fn build(inner: Inner) -> Self {
        RequestCtx(Arc::new(inner))
    }

    /// With the `X-Ab-Test-Id` header's value (only while being made).
    pub fn with_ab_header(self, test: Option<String>) -> Self {
        let mut inner = self.into_inner();
        inner.ab_header = test;
        Self::build(inner)
    }

    /// With the server's token buckets and database, so generations can be metered (only while
    /// being made).
    pub fn with_meters(self, usage: Arc<Usage>, storage: Storage) -> Self {
        let mut inner = self.into_inner();
        inner.meters = Some((usage, storage));
        Self::build(inner)
    }

    fn into_inner(self) -> Inner {
        Arc::try_unwrap(self.0)
            .unwrap_or_else(|_| unreachable!("a request's context is built before it is shared"))
    }

    /// Whether two handles are the same request.
    pub fn same(&self, other: &RequestCtx) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub fn set_actor(&self, actor: &str) {
        *lock(&self.actor) = Some(actor.to_string());
    }

    pub fn actor(&self) -> Option<String> {
        lock(&self.actor).clone()
    }

    pub fn set_principal(&self, p: Option<Principal>) {
        *lock(&self.principal) = p;
    }

    pub fn principal(&self) -> Option<Principal> {
        lock(&self.principal).clone()
    }

    pub fn set_ab(&self, test: &str, v: Variant) {
        *lock(&self.ab) = Some((test.to_string(), v));
    }

    pub fn ab(&self) -> Option<(String, Variant)> {
        lock(&self.ab).clone()
    }

    /// A sequence finished: its model and tokens (the prompt counted once per request's
    /// choices, by the caller passing 0 for the others).
    pub fn add_usage(&self, model: &str, prompt_tokens: usize, completion_tokens: usize) {
        let mut u = lock(&self.counted);
        u.model.get_or_insert_with(|| model.to_string());
        u.prompt_tokens += prompt_tokens as u64;
        u.completion_tokens += completion_tokens as u64;
    }

    /// The counts so far, leaving zero behind (the request log takes them once).
    pub fn take_counted(&self) -> Counted {
        std::mem::take(&mut *lock(&self.counted))
    }

    /// What a generation started now counts its tokens against (`None` when nothing is
    /// limited: no key, or a key with neither a tokens-per-minute limit nor a tenant).
    pub fn meter(&self) -> Option<Meter> {
        let p = self.principal()?;
        let (usage, storage) = self.meters.clone()?;
        let key = p.tokens_per_minute.map(|t| (p.actor.clone(), t));
        if key.is_none() && p.tenant.is_none() {
            return None;
        }
        Some(Meter {
            usage,
            storage,
            runtime: tokio::runtime::Handle::try_current().ok()?,
            key,
            tenant: p.tenant,
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RequestCtx {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Response> {
        // The request-log layer wraps every route; a handler mounted outside it is a bug.
        parts
            .extensions
            .get::<RequestCtx>()
            .cloned()
            .ok_or_else(|| {
                ApiError::internal(
                    "the request has no context (a route outside the request-log layer)",
                )
                .for_path(parts.uri.path())
            })
    }
}

impl crate::server::moderation::Screened for RequestCtx {
    fn screen(&self) -> Option<&Screen> {
        self.0.screen.as_ref()
    }
    fn actor(&self) -> Option<String> {
        RequestCtx::actor(self)
    }
    fn method(&self) -> &str {
        &self.0.method
    }
    fn route(&self) -> &str {
        &self.0.route
    }
    fn request_id(&self) -> &str {
        &self.0.id
    }
}
