//! What the server knows about a request while it runs, and the structured log event it makes
//! when it ends (`GET /api/v1/logs/stream`).
//!
//! One layer outside the auth layer creates a [`RequestCtx`] per request: its id and route,
//! the key the auth layer accepted, the model and token counts the generation layer adds as
//! sequences finish, and the moderation rules in force when it arrived. Handlers reach it as
//! the task-local [`current`], the way they reach the request's tracing span: generation code
//! deep in a surface needs no extra argument (tasks a handler spawns carry it with [`scope`]).
//! The event is sent when the response body ends (or the client goes away), so a streamed
//! reply is counted whole.

pub mod bus;

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

pub use self::bus::{LogBus, LogEvent};
use super::moderation::Screen;
use super::state::Shared;

tokio::task_local! {
    static CURRENT: Arc<RequestCtx>;
}

#[derive(Default)]
struct Usage {
    model: Option<String>,
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// One request in flight.
pub struct RequestCtx {
    pub id: String,
    pub method: String,
    pub route: String,
    actor: Mutex<Option<String>>,
    usage: Mutex<Usage>,
    /// Moderation for this request, when rules are in force.
    pub screen: Option<Screen>,
}

impl RequestCtx {
    pub fn new(id: String, method: String, route: String, screen: Option<Screen>) -> Self {
        RequestCtx {
            id,
            method,
            route,
            actor: Mutex::new(None),
            usage: Mutex::new(Usage::default()),
            screen,
        }
    }

    /// The key id (or `env` / `open`) the auth layer accepted.
    pub fn set_actor(&self, actor: &str) {
        *self.actor.lock().unwrap_or_else(|p| p.into_inner()) = Some(actor.to_string());
    }

    pub fn actor(&self) -> Option<String> {
        self.actor.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A sequence finished: its model and tokens (the prompt counted once per request's
    /// choices, by the caller passing 0 for the others).
    pub fn add_usage(&self, model: &str, prompt_tokens: usize, completion_tokens: usize) {
        let mut u = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        u.model.get_or_insert_with(|| model.to_string());
        u.prompt_tokens += prompt_tokens as u64;
        u.completion_tokens += completion_tokens as u64;
    }
}

/// The request the calling task serves, if any.
pub fn current() -> Option<Arc<RequestCtx>> {
    CURRENT.try_with(Arc::clone).ok()
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

/// The layer: makes the context, runs the request in it, and logs the request when its body
/// ends.
pub async fn layer(State(st): State<Shared>, mut req: Request, next: Next) -> Response {
    let start = Instant::now();
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let ctx = Arc::new(RequestCtx::new(
        id,
        req.method().to_string(),
        req.uri().path().to_string(),
        st.moderation.screen(),
    ));
    req.extensions_mut().insert(ctx.clone());
    let res = CURRENT.scope(ctx.clone(), next.run(req)).await;
    let done = Finished {
        ctx,
        status: res.status().as_u16(),
        start,
        st,
    };
    res.map(|inner| {
        Body::new(Logged {
            inner,
            done: Some(done),
        })
    })
}

/// Sends the request's event once, when dropped.
struct Finished {
    ctx: Arc<RequestCtx>,
    status: u16,
    start: Instant,
    st: Shared,
}

impl Drop for Finished {
    fn drop(&mut self) {
        let u = std::mem::take(&mut *self.ctx.usage.lock().unwrap_or_else(|p| p.into_inner()));
        self.st.logs.send(LogEvent {
            at: super::state::AppState::now_unix(),
            request_id: self.ctx.id.clone(),
            key_id: self.ctx.actor(),
            method: self.ctx.method.clone(),
            route: self.ctx.route.clone(),
            model: u.model,
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            latency_ms: self.start.elapsed().as_millis() as u64,
            status: self.status,
        });
    }
}

/// A response body that logs its request when it ends: at its last frame, or when dropped
/// unfinished (the client went away). Size hints pass through, so lengths are kept.
struct Logged {
    inner: Body,
    done: Option<Finished>,
}

impl HttpBody for Logged {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let p = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = p {
            self.done.take();
        }
        p
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
