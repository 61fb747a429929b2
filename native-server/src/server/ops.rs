//! Operations routes: `/health`, `/ready`, `/metrics` (Prometheus text), `/v1/metrics` (JSON).

use std::fmt::Write;

use crate::registry::HistogramData;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use super::state::Shared;

/// Ops routes.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(super::openapi::document))
}

async fn health(State(st): State<Shared>) -> Response {
    let model = match st.preload.get() {
        Some(Ok(())) => "ok",
        Some(Err(_)) => "failed",
        None => "loading",
    };
    let loaded: Vec<String> = st.registry.resident().into_iter().map(|r| r.name).collect();
    Json(
        json!({"status": "ok", "uptime_secs": st.started.elapsed().as_secs(),
                "components": {"http": "ok", "model": model, "backend": st.cfg.backend},
                "loaded_models": loaded}),
    )
    .into_response()
}

/// 200 once the default model's start-up load has finished (models load on demand after).
async fn ready(State(st): State<Shared>) -> Response {
    let (ready, error) = match st.preload.get() {
        Some(Ok(())) => (true, None),
        Some(Err(e)) => (false, Some(e.clone())),
        None => (false, None),
    };
    let body = json!({"ready": ready, "model_loaded": ready, "engine_running": ready,
                      "error": error});
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// `GET /v1/metrics`: the scheduler counters of every model, summed, as JSON.
pub async fn metrics_json(State(st): State<Shared>) -> Response {
    let s = st.registry.totals().counters;
    Json(json!({
        "prompt_tokens_total": s.prompt_tokens, "cached_prompt_tokens_total": s.cached_prompt_tokens,
        "generation_tokens_total": s.generation_tokens, "requests_started_total": s.requests_started,
        "requests_finished_total": s.requests_finished, "requests_cancelled_total": s.requests_cancelled,
        "requests_failed_total": s.requests_failed, "requests_rejected_total": s.requests_rejected,
        "prefix_cache_hits_total": s.prefix_cache_hits, "requests_running": s.running,
        "requests_waiting": s.waiting, "kv_cache_used_tokens": s.kv_used,
        "kv_cache_capacity_tokens": s.kv_capacity, "steps_total": s.steps,
        "models_loaded": st.registry.resident().len(),
    }))
    .into_response()
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
async fn metrics(State(st): State<Shared>) -> Response {
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
            "Fraction of KV-cache positions holding tokens (0-1).",
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
    (
        [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
        out,
    )
        .into_response()
}
