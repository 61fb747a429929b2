//! What a request may run on, checked when a handler leases a model (so every surface that
//! generates — OpenAI, Ollama, the chat UI, embeddings — is covered in one place):
//!
//! 1. `model: "ab:<id>"` (or an `X-Ab-Test-Id` header) is routed to one arm of the A/B test;
//! 2. a name that is a registered LoRA adapter is a 501 (adapters are metadata only);
//! 3. a key in a tenant may use only the tenant's allowed models (403, the same for a name
//!    that does not exist, so generation does not reveal which names exist either) while the
//!    tenant's token quota lasts (429);
//! 4. a key with a tokens-per-minute limit waits (429 + `Retry-After`) while its bucket is
//!    in debt (shared by replicas on Postgres: see `usage`).
//!
//! The tenant's allow-list is one [`Scope`], and every surface that names or lists a model
//! looks names up through it ([`scope`], then the catalog's `resolve_in` / `names_in`):
//! outside generation, a model out of scope is exactly a missing one (absent from lists, a
//! 404 on show, download and `/v1/models/{id}`, never named in "available: …").

use weft_storage::{StorageError, Tenant};

use crate::registry::Scope;
use crate::server::auth::caller::Caller;
use crate::server::auth::context::RequestCtx;
use crate::server::auth::Principal;
use crate::server::error::ApiError;
use crate::server::inference::Inference;

/// What `model: "ab:<id>"` starts with.
pub const AB_PREFIX: &str = "ab:";

/// The model name to lease for `requested` (`None`: the default model), after the checks
/// above.
pub async fn admit(
    st: &Inference,
    ctx: &RequestCtx,
    requested: Option<&str>,
) -> Result<Option<String>, ApiError> {
    let ab_id = ctx.ab_header.clone().or_else(|| {
        requested
            .and_then(|m| m.trim().strip_prefix(AB_PREFIX))
            .map(str::to_string)
    });
    let name = match ab_id {
        Some(id) => Some(route_ab(st, ctx, id.trim()).await?),
        None => requested.map(str::to_string),
    };
    let stored = st.registry.with_catalog(|c| match &name {
        Some(n) => c.find(n),
        None => c.default_name().map(str::to_string),
    });
    if let (None, Some(n)) = (&stored, &name) {
        if let Some(a) = st.storage.find_adapter(n.trim()).await? {
            return Err(ApiError::not_implemented(format!(
                "{n:?} is LoRA adapter {} (base model {:?}); applying LoRA adapters at inference is not implemented: use the base model",
                a.id, a.base_model
            )));
        }
    }
    let principal = ctx.principal();
    let mut scope = Scope::All;
    if let Some(p) = &principal {
        if let Some(t) = &p.tenant {
            let tenant = st.storage.get_tenant(t).await?;
            check_model(&tenant, stored.as_deref().or(name.as_deref()))?;
            check_quota(&tenant)?;
            scope = Scope::allow_list(tenant.models.as_deref());
        }
        if let Some(tpm) = p.tokens_per_minute {
            let verdict = st.usage.check_tpm(&st.storage, &p.actor).await?;
            verdict.map_err(|secs| {
                ApiError::rate_limited(
                    format!(
                        "this key's limit of {tpm} tokens per minute is used up; retry in {secs} s"
                    ),
                    secs,
                )
            })?;
        }
    }
    // A name in scope that does not exist: the 404 names only what the caller may use.
    if let (None, Some(n)) = (&stored, &name) {
        return Err(st.registry.with_catalog(|c| c.unknown_in(n, &scope)).into());
    }
    Ok(name)
}

/// The arm's model for the next request of test `id`, recorded for the response's headers.
async fn route_ab(st: &Inference, ctx: &RequestCtx, id: &str) -> Result<String, ApiError> {
    let (test, v) = st.storage.route_ab(id).await.map_err(|e| match e {
        StorageError::NotFound(_) => ApiError::unknown_model(format!(
            "no A/B test {id:?}: `model: \"ab:<id>\"` needs the id of a test from GET /api/v1/ab"
        )),
        e => e.into(),
    })?;
    ctx.set_ab(&test.id, v);
    Ok(test.model(v).to_string())
}

/// Whether the tenant's allow-list names `model` (its stored name; `None`: no model at all,
/// which the registry will refuse on its own).
fn check_model(t: &Tenant, model: Option<&str>) -> Result<(), ApiError> {
    let (Some(allowed), Some(m)) = (&t.models, model) else {
        return Ok(());
    };
    if Scope::allow_list(Some(allowed)).allows(m) {
        return Ok(());
    }
    Err(ApiError::model_forbidden(format!(
        "model {m:?} is not allowed for tenant {:?}: it may use {}",
        t.name,
        if allowed.is_empty() {
            "no model".to_string()
        } else {
            allowed.join(", ")
        }
    )))
}

/// Whether the tenant's row, as just read, still has quota left. Finished generations' tokens
/// are in the row before their responses end (see `usage`), so a request sent after another
/// was refused is refused too, on any replica.
fn check_quota(t: &Tenant) -> Result<(), ApiError> {
    let Some(quota) = t.token_quota else {
        return Ok(());
    };
    let used = t.tokens_used;
    if used >= quota {
        return Err(ApiError::quota_exceeded(format!(
            "tenant {:?} has used its token quota ({used} of {quota} tokens); an admin can reset it with PATCH /api/v1/tenants/{} {{\"reset_usage\": true}} or raise token_quota",
            t.name, t.id
        )));
    }
    Ok(())
}

/// The model names `principal` may reach: its tenant's allow-list, else every name.
pub async fn scope_of(st: &Inference, principal: Option<&Principal>) -> Result<Scope, ApiError> {
    let Some(t) = principal.and_then(|p| p.tenant.as_deref()) else {
        return Ok(Scope::All);
    };
    let tenant = st.storage.get_tenant(t).await?;
    Ok(Scope::allow_list(tenant.models.as_deref()))
}

/// The model names the request's caller may reach.
pub async fn scope(st: &Inference, caller: &Caller) -> Result<Scope, ApiError> {
    scope_of(st, Some(&caller.0)).await
}

/// The model names the request `ctx` may reach (Ollama's unload by `keep_alive: 0`).
pub async fn ctx_scope(st: &Inference, ctx: &RequestCtx) -> Result<Scope, ApiError> {
    scope_of(st, ctx.principal().as_ref()).await
}
