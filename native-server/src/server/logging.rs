//! Structured logs with `tracing`: one span per request carrying its id (`x-request-id`, taken
//! from the client or made here, and echoed on the response), method and path; an event when
//! the response starts (status, latency) and, from the generation layer, one when each
//! sequence ends (model, tokens, timings). `--log-format json` writes one JSON object a line.

use std::time::Duration;

use axum::http::{HeaderName, Request, Response};
use axum::Router;
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::trace::TraceLayer;
use tracing::Span;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber (stderr). `filter` is an env-filter directive such as
/// `info` or `weft_server=debug`; `RUST_LOG` wins when set.
pub fn init(format: LogFormat, filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter));
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    // A second init (tests that start several servers in one process) keeps the first.
    let _ = match format {
        LogFormat::Text => b.try_init(),
        LogFormat::Json => b
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
}

#[derive(Clone, Copy)]
struct MakeId;

impl MakeRequestId for MakeId {
    fn make_request_id<B>(&mut self, _: &Request<B>) -> Option<RequestId> {
        super::common::ids::unique()
            .parse()
            .ok()
            .map(RequestId::new)
    }
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Wraps `router` with the request-id and request-span layers.
pub fn layer<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    let trace = TraceLayer::new_for_http()
        .make_span_with(|req: &Request<_>| {
            let id = req
                .headers()
                .get(&REQUEST_ID)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            tracing::info_span!("request", id = %id, method = %req.method(), path = %req.uri().path())
        })
        .on_request(())
        .on_response(|res: &Response<_>, latency: Duration, _: &Span| {
            tracing::info!(
                status = res.status().as_u16(),
                latency_ms = latency.as_millis() as u64,
                "response"
            )
        })
        .on_failure(());
    router
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(trace)
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeId))
}
