//! Structured logs with `tracing`: one span per request carrying its id (`x-request-id`, taken
//! from the client or made here, and echoed on the response), method and path; an event when
//! the response starts (status, latency) and, from the generation layer, one when each
//! sequence ends (model, tokens, timings). `--log-format json` writes one JSON object a line.
//! The filter can be changed while the server runs (the `logging_level` setting).

use std::sync::OnceLock;
use std::time::Duration;

use axum::http::{HeaderName, Request, Response};
use axum::Router;
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::trace::TraceLayer;
use tracing::Span;
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Changes the installed subscriber's filter (the reload handle's type depends on the format,
/// so it is kept behind a closure).
type SetFilter = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

/// The live filter: how to change it, and the start-up directive to go back to.
static LIVE: OnceLock<(SetFilter, String)> = OnceLock::new();

/// Installs the global subscriber (stderr). `filter` is an env-filter directive such as
/// `info` or `weft_server=debug`; `RUST_LOG` wins when set. The filter can be changed later
/// with [`set_filter`] (the `logging_level` setting).
pub fn init(format: LogFormat, filter: &str) {
    let start = std::env::var(EnvFilter::DEFAULT_ENV)
        .ok()
        .filter(|f| EnvFilter::try_new(f).is_ok())
        .unwrap_or_else(|| filter.to_string());
    let b = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(&start))
        .with_writer(std::io::stderr)
        .with_target(false);
    // A second init (tests that start several servers in one process) keeps the first.
    let (handle, ok): (SetFilter, bool) = match format {
        LogFormat::Text => {
            let b = b.with_filter_reloading();
            let h = b.reload_handle();
            let ok = b.try_init().is_ok();
            (
                Box::new(move |f| h.reload(f).map_err(|e| e.to_string())),
                ok,
            )
        }
        LogFormat::Json => {
            let b = b
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_filter_reloading();
            let h = b.reload_handle();
            let ok = b.try_init().is_ok();
            (
                Box::new(move |f| h.reload(f).map_err(|e| e.to_string())),
                ok,
            )
        }
    };
    if ok {
        let _ = LIVE.set((handle, start));
    }
}

/// Whether `directive` is a valid filter (the message says what is wrong).
pub fn check_filter(directive: &str) -> Result<(), String> {
    if directive.trim().is_empty() {
        return Err("must not be empty (null unsets it)".into());
    }
    EnvFilter::builder()
        .with_regex(false)
        .parse(directive)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Applies a filter directive to the running log; `None` goes back to the start-up one.
pub fn set_filter(directive: Option<&str>) -> Result<(), String> {
    let Some((set, start)) = LIVE.get() else {
        return Ok(());
    };
    let d = directive.unwrap_or(start);
    check_filter(d)?;
    set(EnvFilter::new(d))
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
