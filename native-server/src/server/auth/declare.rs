//! [`Routes`]: route groups that carry the role they need. A surface's `routes()` returns one,
//! and the only ways to make one from handlers are the constructors that take the need
//! ([`Routes::public`], [`Routes::read`], [`Routes::user`], [`Routes::admin`],
//! [`Routes::metrics`], [`Routes::pages`]); there is no conversion from a bare router. So a
//! route cannot be mounted without a decision: it does not compile.
//!
//! Each constructor puts [`require`] on its routes with axum's `route_layer` (it runs only
//! when one of them matched, 405s included, never for a path no route serves). `require`
//! authenticates (or not, for public), checks the role, hands the handler the
//! [`Principal`](super::Principal), and tells the outer layer (through the [`Gate`]) what was
//! declared, for the audit and for the undeclared-route backstop in [`super::layer`].

use std::sync::Arc;

use axum::extract::Request;
use axum::handler::Handler;
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use utoipa_axum::router::OpenApiRouter;

use super::policy::Need;
use super::{authorize, Gate};
use crate::server::auth::context::RequestCtx;
use crate::server::error::ApiError;

/// What a router's state must be: each surface is generic over it and takes the part it needs
/// by [`axum::extract::FromRef`], so no surface names the server's whole state.
pub trait RouterState: Clone + Send + Sync + 'static {}
impl<S: Clone + Send + Sync + 'static> RouterState for S {}

/// Routes whose required role is declared (see the module comment), over router state `S`.
pub struct Routes<S>(OpenApiRouter<S>);

impl<S: RouterState> Routes<S> {
    /// No routes yet, with the document's fixed parts.
    pub fn with_openapi(doc: utoipa::openapi::OpenApi) -> Self {
        Routes(OpenApiRouter::with_openapi(doc))
    }

    fn declare(need: Need, r: OpenApiRouter<S>) -> Self {
        Routes(
            r.route_layer(middleware::from_fn(move |req: Request, next: Next| {
                require(need, req, next)
            })),
        )
    }

    /// Routes anyone may call, without a key.
    pub fn public(r: OpenApiRouter<S>) -> Self {
        Self::declare(Need::Public, r)
    }

    /// Routes that need a `readonly` key or better.
    pub fn read(r: OpenApiRouter<S>) -> Self {
        Self::declare(Need::Read, r)
    }

    /// Routes that need a `user` key or better (inference).
    pub fn user(r: OpenApiRouter<S>) -> Self {
        Self::declare(Need::Use, r)
    }

    /// Routes that need an `admin` key.
    pub fn admin(r: OpenApiRouter<S>) -> Self {
        Self::declare(Need::Admin, r)
    }

    /// `GET /metrics`: a `readonly` key, or none while `metrics_public` is on.
    pub fn metrics(r: OpenApiRouter<S>) -> Self {
        Self::declare(Need::Metrics, r)
    }

    /// Routes outside the OpenAPI document (web pages, downloads), with what they need.
    pub fn pages(need: Need, r: Router<S>) -> Self {
        Self::declare(need, OpenApiRouter::from(r))
    }

    pub fn merge(self, other: Self) -> Self {
        Routes(self.0.merge(other.0))
    }

    pub fn nest(self, path: &str, other: Self) -> Self {
        Routes(self.0.nest(path, other.0))
    }

    /// Answers requests no route serves with `handler`, declared `need` like a route.
    pub fn fallback<H, T>(self, need: Need, handler: H) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        let service = axum::routing::any(handler).layer(middleware::from_fn(
            move |req: Request, next: Next| require(need, req, next),
        ));
        Routes(self.0.fallback(service))
    }

    /// The router and the OpenAPI document of every route.
    pub fn split_for_parts(self) -> (Router<S>, utoipa::openapi::OpenApi) {
        self.0.split_for_parts()
    }
}

/// A declared route's check: runs after routing, before its handler.
async fn require(need: Need, mut req: Request, next: Next) -> Response {
    let Some(gate) = req.extensions().get::<Arc<Gate>>().cloned() else {
        // Without the outer layer there is nobody to authenticate against: refuse.
        tracing::error!("a declared route ran without the auth layer around the router");
        return ApiError::forbidden("this server is misconfigured: no authentication layer")
            .plain();
    };
    let need = gate.declare(need);
    let ctx = req.extensions().get::<RequestCtx>().cloned();
    match authorize(&gate.st, need, req.headers()).await {
        Ok(p) => {
            gate.set_allowed();
            if let (Some(p), Some(ctx)) = (&p, &ctx) {
                ctx.set_actor(&p.actor);
            }
            if let Some(p) = &p {
                gate.set_actor(&p.actor);
                req.extensions_mut().insert(p.clone());
            }
            if let Some(ctx) = &ctx {
                ctx.set_principal(p);
            }
            next.run(req).await
        }
        Err((actor, e)) => {
            if let Some(a) = &actor {
                gate.set_actor(a);
                if let Some(ctx) = &ctx {
                    ctx.set_actor(a);
                }
            }
            let mut r = e.for_path(&gate.path);
            if r.status() == 401 {
                r.headers_mut()
                    .insert("www-authenticate", HeaderValue::from_static("Bearer"));
            }
            r
        }
    }
}
