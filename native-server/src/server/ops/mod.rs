//! Operations routes: `/health`, `/ready`, `/metrics` (Prometheus text), `/v1/metrics` (JSON).
//! The auth layer counts the requests it refused (`auth::denials`); `/metrics` shows them.

mod state;

use std::fmt::Write;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::registry::HistogramData;
use crate::server::auth::RouterState;
use axum::extract::FromRef;
pub use state::OpsState;

/// Ops routes (at the root).
pub fn routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    OpsState: FromRef<S>,
{
    use crate::server::auth::Routes;
    let probes = OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(ready));
    Routes::public(probes).merge(Routes::metrics(
        OpenApiRouter::new().routes(routes!(metrics)),
    ))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Components {
    pub http: &'static str,
    /// The default model's start-up load: `loading`, `ok` or `failed`.
    pub model: &'static str,
    pub backend: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub status: &'static str,
    pub uptime_secs: u64,
    pub components: Components,
    pub loaded_models: Vec<String>,
}

/// Liveness and component status.
#[utoipa::path(get, path = "/health", tag = "ops", responses((status = 200, body = Health)))]
async fn health(State(st): State<OpsState>) -> Json<Health> {
    let model = match st.preload.get() {
        Some(Ok(())) => "ok",
        Some(Err(_)) => "failed",
        None => "loading",
    };
    let loaded_models = st.registry.resident().into_iter().map(|r| r.name).collect();
    Json(Health {
        status: "ok",
        uptime_secs: st.started.elapsed().as_secs(),
        components: Components {
            http: "ok",
            model,
            backend: st.cfg.backend.clone(),
        },
        loaded_models,
    })
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Ready {
    pub ready: bool,
    pub model_loaded: bool,
    pub engine_running: bool,
    /// Why the default model failed to load, if it did.
    pub error: Option<String>,
}

/// 200 once the default model's start-up load has finished (models load on demand after).
#[utoipa::path(get, path = "/ready", tag = "ops",
    responses((status = 200, body = Ready), (status = 503, body = Ready)))]
async fn ready(State(st): State<OpsState>) -> Response {
    let (ready, error) = match st.preload.get() {
        Some(Ok(())) => (true, None),
        Some(Err(e)) => (false, Some(e.clone())),
        None => (false, None),
    };
    let body = Ready {
        ready,
        model_loaded: ready,
        engine_running: ready,
        error,
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// The scheduler counters of every model, summed (models already unloaded included).
#[derive(Debug, Serialize, ToSchema)]
pub struct MetricsJson {
    pub prompt_tokens_total: u64,
    pub cached_prompt_tokens_total: u64,
    pub generation_tokens_total: u64,
    pub requests_started_total: u64,
    pub requests_finished_total: u64,
    pub requests_cancelled_total: u64,
    pub requests_failed_total: u64,
    pub requests_rejected_total: u64,
    pub prefix_cache_hits_total: u64,
    /// Requests whose cached prompt start was copied from another sequence's cache.
    pub prefix_copies_total: u64,
    pub requests_running: u64,
    pub requests_waiting: u64,
    pub kv_cache_used_tokens: u64,
    pub kv_cache_capacity_tokens: u64,
    pub steps_total: u64,
    pub models_loaded: usize,
}

/// `GET /v1/metrics`: the scheduler counters as JSON.
#[utoipa::path(get, path = "/metrics", tag = "openai",
    responses((status = 200, body = MetricsJson)))]
pub async fn metrics_json(State(st): State<OpsState>) -> Json<MetricsJson> {
    let s = st.registry.totals().counters;
    Json(MetricsJson {
        prompt_tokens_total: s.prompt_tokens,
        cached_prompt_tokens_total: s.cached_prompt_tokens,
        generation_tokens_total: s.generation_tokens,
        requests_started_total: s.requests_started,
        requests_finished_total: s.requests_finished,
        requests_cancelled_total: s.requests_cancelled,
        requests_failed_total: s.requests_failed,
        requests_rejected_total: s.requests_rejected,
        prefix_cache_hits_total: s.prefix_cache_hits,
        prefix_copies_total: s.prefix_copies,
        requests_running: s.running,
        requests_waiting: s.waiting,
        kv_cache_used_tokens: s.kv_used,
        kv_cache_capacity_tokens: s.kv_capacity,
        steps_total: s.steps,
        models_loaded: st.registry.resident().len(),
    })
}

fn metric(out: &mut String, name: &str, kind: &str, help: &str, v: f64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
    );
}

fn histogram(out: &mut String, name: &str, help: &str, h: &HistogramData) {
    let (buckets, sum, count) = h.clone();
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    for (le, c) in buckets {
        let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {c}");
    }
    let _ = writeln!(
        out,
        "{name}_bucket{{le=\"+Inf\"}} {count}\n{name}_sum {sum}\n{name}_count {count}"
    );
}

/// `GET /metrics`: Prometheus text, with vLLM-style names under the `weft:` prefix.
#[utoipa::path(get, path = "/metrics", tag = "ops",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain")))]
async fn metrics(State(st): State<OpsState>) -> Response {
    let mut out = String::new();
    let loaded = st.registry.resident().len();
    metric(
        &mut out,
        "weft:model_loaded",
        "gauge",
        "Models resident in memory.",
        loaded as f64,
    );
    {
        let stats = st.registry.totals();
        let s = &stats.counters;
        metric(
            &mut out,
            "weft:prompt_tokens_total",
            "counter",
            "Prompt tokens evaluated (cache hits excluded).",
            s.prompt_tokens as f64,
        );
        metric(
            &mut out,
            "weft:generation_tokens_total",
            "counter",
            "Tokens generated.",
            s.generation_tokens as f64,
        );
        metric(
            &mut out,
            "weft:num_requests_running",
            "gauge",
            "Requests holding a sequence slot.",
            s.running as f64,
        );
        metric(
            &mut out,
            "weft:num_requests_waiting",
            "gauge",
            "Requests waiting for a slot.",
            s.waiting as f64,
        );
        let usage = if s.kv_capacity > 0 {
            s.kv_used as f64 / s.kv_capacity as f64
        } else {
            0.0
        };
        metric(
            &mut out,
            "weft:kv_cache_usage_perc",
            "gauge",
            "Fraction of the KV pool's blocks held by sequences (0-1).",
            usage,
        );
        metric(
            &mut out,
            "weft:prefix_cache_queries_total",
            "counter",
            "Prompt tokens looked up in the prefix cache.",
            (s.prompt_tokens + s.cached_prompt_tokens) as f64,
        );
        metric(
            &mut out,
            "weft:prefix_cache_hits_total",
            "counter",
            "Prompt tokens served from the prefix cache.",
            s.cached_prompt_tokens as f64,
        );
        metric(
            &mut out,
            "weft:prefix_copies_total",
            "counter",
            "Requests whose cached prompt start was copied from another sequence's cache.",
            s.prefix_copies as f64,
        );
        metric(
            &mut out,
            "weft:request_success_total",
            "counter",
            "Requests finished.",
            s.requests_finished as f64,
        );
        metric(
            &mut out,
            "weft:request_cancelled_total",
            "counter",
            "Requests cancelled (client gone).",
            s.requests_cancelled as f64,
        );
        metric(
            &mut out,
            "weft:request_failed_total",
            "counter",
            "Requests failed.",
            s.requests_failed as f64,
        );
        metric(
            &mut out,
            "weft:request_rejected_total",
            "counter",
            "Requests refused because the queue was full.",
            s.requests_rejected as f64,
        );
        metric(
            &mut out,
            "weft:engine_steps_total",
            "counter",
            "Engine steps run.",
            s.steps as f64,
        );
        metric(
            &mut out,
            "weft:num_preemptions_total",
            "counter",
            "Running requests whose KV blocks were taken back (they are fed again later).",
            s.preemptions as f64,
        );
        histogram(
            &mut out,
            "weft:time_to_first_token_seconds",
            "Time from submission to the first token.",
            &stats.ttft,
        );
        histogram(
            &mut out,
            "weft:inter_token_latency_seconds",
            "Time between consecutive tokens of a stream.",
            &stats.inter_token,
        );
        histogram(
            &mut out,
            "weft:e2e_request_latency_seconds",
            "Whole request latency.",
            &stats.e2e,
        );
    }
    crate::server::auth::denials::render(&mut out);
    (
        [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
        out,
    )
        .into_response()
}
