//! Authentication and authorization, as one layer on the whole router (not a check in each
//! handler): it reads `Authorization: Bearer <key>`, finds the key's role, checks it against
//! the route ([`policy`]), applies the key's requests-per-minute limit ([`limit`]), hands the
//! handlers a [`Principal`], and writes an audit row for every admin change.
//!
//! **Open mode.** Until the first key is created (and with no `WEFT_ADMIN_KEY`), every request
//! is let in as an admin, as before keys existed; `weft serve` refuses to start that way on a
//! non-loopback address unless `--insecure-no-auth`. Keys are never deleted (only revoked), so
//! once there is one the server stays closed.

pub mod access;
pub mod caller;
pub mod limit;
pub mod policy;
pub mod secret;
pub mod usage;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::Value;
use weft_storage::{NewAudit, Storage};

use self::policy::{Need, Role};
use super::context::RequestCtx;
use super::error::ApiError;
use super::state::Shared;

/// Who made a request (in the request's extensions for handlers).
#[derive(Clone, Debug)]
pub struct Principal {
    /// A key id, `env` (`WEFT_ADMIN_KEY`) or `open` (no keys exist).
    pub actor: String,
    pub role: Role,
    pub tenant: Option<String>,
    /// The key's tokens-per-minute limit.
    pub tokens_per_minute: Option<u32>,
}

/// Details a handler adds to its audit row (in the response's extensions). Never secrets.
#[derive(Clone, Debug)]
pub struct AuditDetails(pub Value);

/// The server's authentication state.
pub struct Auth {
    /// SHA-256 of `WEFT_ADMIN_KEY`, an admin key accepted as given.
    env_admin: Option<String>,
    /// Set once a key exists: from then on every non-public request needs one.
    closed: AtomicBool,
    limiter: limit::Limiter,
    /// The `metrics_public` setting: `GET /metrics` without a key.
    metrics_public: AtomicBool,
    /// Tokens used per key and tenant.
    pub usage: Arc<usage::Usage>,
}

impl Auth {
    pub fn new(env_admin_key: Option<&str>) -> Auth {
        let env_admin = env_admin_key.filter(|k| !k.is_empty()).map(secret::hash);
        Auth {
            closed: AtomicBool::new(env_admin.is_some()),
            env_admin,
            limiter: limit::Limiter::default(),
            metrics_public: AtomicBool::new(false),
            usage: Arc::default(),
        }
    }

    /// Applies the `metrics_public` setting.
    pub fn set_metrics_public(&self, public: bool) {
        self.metrics_public.store(public, Ordering::Relaxed);
    }

    /// Whether requests need a key (checked against the database while open, so a key made
    /// by another replica or by `weft keys create` closes this one too).
    pub async fn is_closed(&self, storage: &Storage) -> Result<bool, ApiError> {
        if self.closed.load(Ordering::Relaxed) {
            return Ok(true);
        }
        if storage.key_count().await? > 0 {
            self.closed.store(true, Ordering::Relaxed);
            return Ok(true);
        }
        Ok(false)
    }

    /// The principal for a request's headers, or a 401.
    async fn identify(
        &self,
        storage: &Storage,
        headers: &HeaderMap,
    ) -> Result<Principal, ApiError> {
        if let Some(p) = super::login::principal(storage, headers).await? {
            return Ok(p);
        }
        let key = bearer(headers).ok_or_else(|| {
            ApiError::unauthorized(
                "missing API key: send it as the header `Authorization: Bearer <key>`",
            )
        })?;
        let h = secret::hash(key);
        if self
            .env_admin
            .as_deref()
            .is_some_and(|e| secret::same(e, &h))
        {
            return Ok(Principal {
                actor: "env".into(),
                role: Role::Admin,
                tenant: None,
                tokens_per_minute: None,
            });
        }
        let bad = || ApiError::unauthorized("invalid API key");
        let k = storage.key_by_hash(&h).await?.ok_or_else(bad)?;
        let now = weft_storage::now();
        if k.revoked_at.is_some() {
            return Err(ApiError::unauthorized("this API key has been revoked"));
        }
        if k.expires_at.is_some_and(|t| t <= now) {
            return Err(ApiError::unauthorized("this API key has expired"));
        }
        let role = Role::parse(&k.role).ok_or_else(bad)?;
        if let Some(rpm) = k.rate_limit_rpm.filter(|r| *r > 0) {
            let rpm = u32::try_from(rpm).unwrap_or(u32::MAX);
            self.limiter.take(&k.id, rpm).map_err(|secs| {
                ApiError::rate_limited(
                    format!("rate limit of {rpm} requests per minute reached for this key; retry in {secs} s"),
                    secs,
                )
            })?;
        }
        // Written at most once a minute per key, off the request's path.
        if k.last_used_at.is_none_or(|t| now - t >= 60) {
            let (s, id) = (storage.clone(), k.id.clone());
            tokio::spawn(async move {
                if let Err(e) = s.touch_key(&id).await {
                    tracing::warn!(error = %e, "recording a key's last use");
                }
            });
        }
        Ok(Principal {
            actor: k.id,
            role,
            tenant: k.tenant,
            tokens_per_minute: k
                .tokens_per_minute
                .filter(|t| *t > 0)
                .map(|t| u32::try_from(t).unwrap_or(u32::MAX)),
        })
    }
}

/// The key in `Authorization: Bearer <key>`.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get("authorization")?.to_str().ok()?.trim();
    let (scheme, key) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| key.trim())
        .filter(|k| !k.is_empty())
}

/// The layer: authenticate, authorize, run, audit.
pub async fn layer(State(st): State<Shared>, mut req: Request, next: Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    let need = match policy::need(&method, &path) {
        policy::Need::Read
            if path == "/metrics" && st.auth.metrics_public.load(Ordering::Relaxed) =>
        {
            policy::Need::Public
        }
        need => need,
    };
    let remote = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string());
    let audit = |actor: Option<String>, status: u16, details: Option<Value>| NewAudit {
        actor: actor.unwrap_or_else(|| "unauthenticated".into()),
        method: method.to_string(),
        route: path.clone(),
        status,
        remote: remote.clone(),
        details,
    };
    let (actor, outcome) = match authorize(&st, need, req.headers()).await {
        Ok(p) => (p.as_ref().map(|p| p.actor.clone()), Ok(p)),
        Err((actor, e)) => (actor, Err(e)),
    };
    // The request's context (made by the request-log layer outside this one) learns who it
    // is: the request log and moderation flags name the key by its id.
    let ctx = req.extensions().get::<Arc<RequestCtx>>().cloned();
    if let (Some(a), Some(ctx)) = (&actor, &ctx) {
        ctx.set_actor(a);
    }
    let res = match outcome {
        Ok(p) => {
            if let Some(p) = &p {
                req.extensions_mut().insert(p.clone());
            }
            if let Some(ctx) = &ctx {
                ctx.set_principal(p);
            }
            let mut res = next.run(req).await;
            if let Some((test, v)) = ctx.as_ref().and_then(|c| c.ab()) {
                if let Ok(t) = HeaderValue::from_str(&test) {
                    res.headers_mut().insert("x-ab-test-id", t);
                    res.headers_mut()
                        .insert("x-ab-variant", HeaderValue::from_static(v.as_str()));
                }
            }
            res
        }
        Err(e) => {
            let mut r = e.for_path(&path);
            if r.status() == 401 {
                r.headers_mut()
                    .insert("www-authenticate", HeaderValue::from_static("Bearer"));
            }
            r
        }
    };
    if policy::audited(&method, &path) {
        let details = res.extensions().get::<AuditDetails>().map(|d| d.0.clone());
        let row = audit(actor, res.status().as_u16(), details);
        if let Err(e) = st.storage.append_audit(row).await {
            tracing::error!(error = %e, "writing an audit row");
        }
    }
    res
}

/// The principal a request may proceed as, or the error (with the actor when the key was
/// valid but its role too low).
async fn authorize(
    st: &Shared,
    need: Need,
    headers: &HeaderMap,
) -> Result<Option<Principal>, (Option<String>, ApiError)> {
    if need == Need::Public {
        return Ok(None);
    }
    if !st
        .auth
        .is_closed(&st.storage)
        .await
        .map_err(|e| (None, e))?
    {
        return Ok(Some(Principal {
            actor: "open".into(),
            role: Role::Admin,
            tenant: None,
            tokens_per_minute: None,
        }));
    }
    let p = st
        .auth
        .identify(&st.storage, headers)
        .await
        .map_err(|e| (None, e))?;
    if !p.role.allows(need) {
        let what = match need {
            Need::Admin => "an admin key",
            _ => "a user or admin key",
        };
        let e = ApiError::forbidden(format!(
            "a {} key may not use this route: it needs {what}",
            p.role.as_str()
        ));
        return Err((Some(p.actor), e));
    }
    Ok(Some(p))
}
