//! What the server knows about a request while it runs, and the structured log event it makes
//! when it ends (`GET /api/v1/logs/stream`).
//!
//! This layer, outside the auth layer, creates the request's one [`RequestCtx`] (see
//! `server/auth/context.rs`) and runs everything inside it; the auth layer and the handlers fill it
//! in. The event is sent when the response body ends (or the client goes away), so a streamed
//! reply is counted whole.

pub mod bus;
mod state;

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

pub use self::bus::{LogBus, LogEvent};
use super::auth::context::RequestCtx;
pub use state::LogState;

/// The layer: makes the context, runs the request in it, and logs the request when its body
/// ends.
pub async fn layer(State(st): State<LogState>, mut req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let ab_header = req
        .headers()
        .get("x-ab-test-id")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty());
    let ctx = RequestCtx::new(
        id,
        req.method().to_string(),
        req.uri().path().to_string(),
        st.moderation.screen(),
    )
    .with_ab_header(ab_header)
    .with_meters(st.usage.clone(), st.storage.clone());
    req.extensions_mut().insert(ctx.clone());
    let res = next.run(req).await;
    let done = Finished {
        ctx,
        status: res.status().as_u16(),
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
    ctx: RequestCtx,
    status: u16,
    st: LogState,
}

impl Drop for Finished {
    fn drop(&mut self) {
        let u = self.ctx.take_counted();
        self.st.logs.send(LogEvent {
            at: super::clock::now_unix(),
            request_id: self.ctx.id.clone(),
            key_id: self.ctx.actor(),
            method: self.ctx.method.clone(),
            route: self.ctx.route.clone(),
            model: u.model,
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            latency_ms: self.ctx.start.elapsed().as_millis() as u64,
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
