//! What the auth layer knows about the request being served, for code deep in the handlers
//! (leasing a model, starting a generation) without threading it through every surface's
//! handler: a task-local set by the layer around the handler.
//!
//! Code run on other tasks than the handler's sees none unless the task is spawned inside
//! [`RequestCtx::scope`] (the built-in tool loop's is); leases and generations are otherwise
//! started in the handler, before it returns.

use std::sync::{Arc, Mutex};

use weft_storage::{Storage, Variant};

use super::usage::{Meter, Usage};
use super::Principal;

/// One request's context.
pub struct RequestCtx {
    pub principal: Option<Principal>,
    /// The request's `X-Ab-Test-Id` header: route by this A/B test whatever the model says.
    pub ab_header: Option<String>,
    /// The A/B test and arm the request was routed to (for the response's headers).
    pub ab: Mutex<Option<(String, Variant)>>,
    pub usage: Arc<Usage>,
    pub storage: Storage,
}

tokio::task_local! {
    static CTX: Arc<RequestCtx>;
}

impl RequestCtx {
    /// Runs `f` with `ctx` as the current request's context.
    pub async fn scope<F: std::future::Future>(ctx: Arc<RequestCtx>, f: F) -> F::Output {
        CTX.scope(ctx, f).await
    }

    /// The current request's context, if running inside one.
    pub fn current() -> Option<Arc<RequestCtx>> {
        CTX.try_with(Arc::clone).ok()
    }

    pub fn set_ab(&self, test: &str, v: Variant) {
        *self.ab.lock().unwrap_or_else(|p| p.into_inner()) = Some((test.to_string(), v));
    }

    pub fn ab(&self) -> Option<(String, Variant)> {
        self.ab.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// What a generation started now counts its tokens against (`None` when nothing is
    /// limited: no key, or a key with neither a tokens-per-minute limit nor a tenant).
    pub fn meter(&self) -> Option<Meter> {
        let p = self.principal.as_ref()?;
        let key = p.tokens_per_minute.map(|t| (p.actor.clone(), t));
        if key.is_none() && p.tenant.is_none() {
            return None;
        }
        Some(Meter {
            usage: self.usage.clone(),
            storage: self.storage.clone(),
            runtime: tokio::runtime::Handle::try_current().ok()?,
            key,
            tenant: p.tenant.clone(),
        })
    }
}
