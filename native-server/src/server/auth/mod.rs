//! Authentication and authorization in the router's shape.
//!
//! **Who may call a route is declared where its group is mounted**, the way axum's examples
//! nest an admin router behind an auth layer: every surface's `routes()` returns a
//! [`Routes`], made only by constructors that take the need (`Routes::public`, `read`,
//! `user`, `admin`, `metrics`, `pages`), each putting the check on its group with
//! `route_layer`. There is no path table, and nothing converts a bare router into `Routes`,
//! so **forgetting fails closed**: a route without a decision does not compile into the
//! server. The needs: public (`/health`, `/ready`, `/openapi.json`, `GET /api/v1/about`, the
//! static pages, and the 404 for paths no route serves); admin (all of `/api/v1`, the Ollama
//! routes that change the model store, skill install/remove); read (`GET` on the inference
//! side); use (inference, chat-UI sessions, uploads). `tests/tests/security/authz.rs` checks
//! every route of the OpenAPI document, and the pages outside it, against
//! `tests/tests/security/routes.tsv`, so a new route also needs a line there.
//!
//! Two layers share one [`Gate`] per request: the outer [`layer`] (on the whole router) opens
//! it; the route's declaration authenticates `Authorization: Bearer <key>` (or lets a public
//! request through without), checks the key's role, applies the key's requests-per-minute
//! limit ([`limit`]), gives the handler the [`Principal`] (the [`caller::Caller`] extractor)
//! and records the need. Back outside, the outer layer writes an audit row for admin changes
//! ([`policy::audited`]) and adds the A/B headers. A backstop: the outer layer refuses (403,
//! logged as a bug) the answer of any request no declaration saw — only a route added to the
//! finished router by hand, outside `Routes`, could get there, and its handler has already
//! run, which is why `Routes` is the rule and this only the net.
//!
//! **Open mode.** Until the first key is created (and with no `WEFT_ADMIN_KEY`), every request
//! is let in as an admin (principal `open`), as before keys existed; `weft serve` refuses to
//! start that way on a non-loopback address unless `--insecure-no-auth`. Keys are never
//! deleted (only revoked), so once there is one the server stays closed.

pub mod audit_rule;
pub mod caller;
pub mod context;
mod declare;
pub mod denials;
pub mod limit;
pub mod policy;
pub mod secret;
pub mod signin;
mod signins;
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

use self::context::RequestCtx;
pub use self::declare::{RouterState, Routes};
use self::policy::{Need, Role};
use super::error::ApiError;

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

/// What the auth layer reads: the keys' state and the database.
#[derive(Clone)]
pub struct AuthState {
    pub auth: Arc<Auth>,
    pub storage: Storage,
}

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
        if let Some(p) = signin::principal(storage, headers).await? {
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
            self.limiter.take(storage, &k.id, rpm).await?.map_err(|secs| {
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

/// What the outer layer and the route's declaration tell each other about one request.
pub(super) struct Gate {
    pub(super) st: AuthState,
    /// The full path (nested routers see a stripped one).
    pub(super) path: String,
    /// What the matched route declared; `None`: nothing declared it (yet).
    need: std::sync::OnceLock<Need>,
    /// The key that made the request (also when its role was too low).
    actor: std::sync::Mutex<Option<String>>,
    /// Whether the declaration let the request through (refusals are a metric, not audit rows).
    allowed: AtomicBool,
}

impl Gate {
    /// Records the declaration; returns the need to check ([`Need::Metrics`] resolved).
    pub(super) fn declare(&self, need: Need) -> Need {
        let _ = self.need.set(need);
        match need {
            Need::Metrics if self.st.auth.metrics_public.load(Ordering::Relaxed) => Need::Public,
            Need::Metrics => Need::Read,
            n => n,
        }
    }

    pub(super) fn set_actor(&self, actor: &str) {
        *self.actor.lock().unwrap_or_else(|p| p.into_inner()) = Some(actor.to_string());
    }

    pub(super) fn set_allowed(&self) {
        self.allowed.store(true, Ordering::Relaxed);
    }

    fn allowed(&self) -> bool {
        self.allowed.load(Ordering::Relaxed)
    }

    fn actor(&self) -> Option<String> {
        self.actor.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The outer layer, on the whole router: opens the request's [`Gate`], lets the router and
/// the matched route's declaration ([`declare`]) decide, refuses a response no declaration
/// saw, adds the A/B headers and writes the audit row.
pub async fn layer(State(st): State<AuthState>, mut req: Request, next: Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    let remote = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string());
    let gate = Arc::new(Gate {
        st: st.clone(),
        path: path.clone(),
        need: Default::default(),
        actor: Default::default(),
        allowed: AtomicBool::new(false),
    });
    req.extensions_mut().insert(gate.clone());
    let ctx = req.extensions().get::<RequestCtx>().cloned();
    let mut res = next.run(req).await;
    let need = gate.need.get().copied();
    if need.is_none() {
        // Only a route added to the router outside `Routes` gets here (a bug): its handler
        // has run, but its answer does not leave.
        tracing::error!(%method, %path, "a route without a declared role answered; refused");
        res = ApiError::forbidden(format!(
            "{method} {path} declares no role, so nobody may call it"
        ))
        .for_path(&path);
    }
    if let Some((test, v)) = ctx.as_ref().and_then(|c| c.ab()) {
        if let Ok(t) = HeaderValue::from_str(&test) {
            res.headers_mut().insert("x-ab-test-id", t);
            res.headers_mut()
                .insert("x-ab-variant", HeaderValue::from_static(v.as_str()));
        }
    }
    let audited = policy::audited(&method, &path, need);
    if audit_rule::decide(audited, gate.allowed(), res.status().as_u16()) {
        let details = res.extensions().get::<AuditDetails>().map(|d| d.0.clone());
        let row = NewAudit {
            actor: gate.actor().unwrap_or_else(|| "unauthenticated".into()),
            method: method.to_string(),
            route: audit_rule::route(&path),
            status: res.status().as_u16(),
            remote,
            details,
        };
        if let Err(e) = st.storage.append_audit(row).await {
            tracing::error!(error = %e, "writing an audit row");
        }
    }
    res
}

/// The principal a request may proceed as, or the error (with the actor when the key was
/// valid but its role too low).
pub(super) async fn authorize(
    st: &AuthState,
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
