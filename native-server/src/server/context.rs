//! The one context of a request in flight, for code deep in the handlers (leasing a model,
//! starting a generation, moderating, logging) without threading it through every surface's
//! handler: a task-local set once, by the request-log layer around everything else.
//!
//! What it holds is filled in as the request goes through the layers: its id, method, route,
//! start time and moderation rules when it arrives; the key the auth layer accepted (its
//! actor, role, tenant and limits); the A/B arm the request was routed to; and the model and
//! token counts the generation layer adds as sequences finish. Tasks a handler spawns to serve
//! the request carry it with [`scope`]; leases and generations are otherwise started in the
//! handler, before it returns.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use weft_storage::{Storage, Variant};

use super::auth::usage::{Meter, Usage};
use super::auth::Principal;
use super::moderation::Screen;

tokio::task_local! {
    static CURRENT: Arc<RequestCtx>;
}

/// Tokens counted for the request log.
#[derive(Default)]
pub struct Counted {
    pub model: Option<String>,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// One request in flight.
pub struct RequestCtx {
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
    pub fn new(id: String, method: String, route: String, screen: Option<Screen>) -> Self {
        RequestCtx {
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
        }
    }

    /// With the `X-Ab-Test-Id` header's value.
    pub fn with_ab_header(mut self, test: Option<String>) -> Self {
        self.ab_header = test;
        self
    }

    /// With the server's token buckets and database, so generations can be metered.
    pub fn with_meters(mut self, usage: Arc<Usage>, storage: Storage) -> Self {
        self.meters = Some((usage, storage));
        self
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

/// The request the calling task serves, if any.
pub fn current() -> Option<Arc<RequestCtx>> {
    CURRENT.try_with(Arc::clone).ok()
}

/// Runs `fut` as part of the request `ctx`.
pub async fn within<F: std::future::Future>(ctx: Arc<RequestCtx>, fut: F) -> F::Output {
    CURRENT.scope(ctx, fut).await
}

/// `fut` with the calling task's request context (for a task spawned to serve the request).
pub fn scope<F: std::future::Future>(fut: F) -> impl std::future::Future<Output = F::Output> {
    let ctx = current();
    async move {
        match ctx {
            Some(c) => CURRENT.scope(c, fut).await,
            None => fut.await,
        }
    }
}
