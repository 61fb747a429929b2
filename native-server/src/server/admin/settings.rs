//! `GET/POST/PATCH /api/v1/settings`: the server's persisted settings, validated against a
//! fixed schema (an unknown key or a wrong type is a 400). The sampling settings are the
//! defaults used when neither the request nor the operator's `weft serve` flags set a value;
//! they apply to the next request. `moderation` (on/off; unset: on) switches the moderation
//! rules for requests that arrive from then on; `logging_level` (an env-filter directive such
//! as `debug` or `info,weft_server=trace`; unset: the start-up filter) is applied to the
//! running server's log at once. `max_tokens` (the default and cap of generated tokens; unset:
//! `--max-tokens`) and `queue_size` (requests that may wait per model; unset: `--queue`) apply
//! to the next request, the queue also to models already loaded; `metrics_public` (unset:
//! false) lets `GET /metrics` through without a key. `audit_retention_days` and
//! `audit_retention_rows` (unset: [`AUDIT_DAYS`] days, [`AUDIT_ROWS`] rows) bound the audit
//! log: older rows, and rows beyond the newest N, are removed when the setting changes and
//! every [`PRUNE_EVERY`]. Replicas sharing a database poll it every [`POLL`] and pick
//! up changes made elsewhere.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Map, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::common::{changed, Changed};
use crate::server::common::sampling::{resolve_with, Precedence, SamplingFields};
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::extract::ApiJson;
use crate::server::logging;

use crate::server::admin::AdminState;
use crate::server::auth::RouterState;
/// How often a replica looks for settings changed by another.
pub use crate::server::clock::POLL;
use axum::extract::FromRef;
/// How often the audit log is pruned to its retention.
pub const PRUNE_EVERY: Duration = Duration::from_secs(600);
/// Audit retention when unset: days, and rows.
pub const AUDIT_DAYS: i64 = 90;
pub const AUDIT_ROWS: i64 = 100_000;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Number,
    Integer,
    Bool,
    Text,
}

/// Every setting and its JSON type.
const SCHEMA: &[(&str, Kind)] = &[
    ("temperature", Kind::Number),
    ("top_k", Kind::Integer),
    ("top_p", Kind::Number),
    ("min_p", Kind::Number),
    ("repeat_penalty", Kind::Number),
    ("presence_penalty", Kind::Number),
    ("frequency_penalty", Kind::Number),
    ("repeat_last_n", Kind::Integer),
    ("seed", Kind::Integer),
    ("moderation", Kind::Bool),
    ("logging_level", Kind::Text),
    ("max_tokens", Kind::Integer),
    ("queue_size", Kind::Integer),
    ("metrics_public", Kind::Bool),
    ("audit_retention_days", Kind::Integer),
    ("audit_retention_rows", Kind::Integer),
];

pub fn routes<S: RouterState>() -> OpenApiRouter<S>
where
    AdminState: FromRef<S>,
{
    OpenApiRouter::new().routes(routes!(get_settings, replace, patch))
}

/// The sampling defaults a settings map holds (unknown keys, e.g. from a newer version, are
/// ignored).
fn sampling_of(m: &Map<String, Value>) -> SamplingFields {
    let f = |k: &str| m.get(k).and_then(Value::as_f64).map(|v| v as f32);
    let i = |k: &str| m.get(k).and_then(Value::as_i64);
    SamplingFields {
        temperature: f("temperature"),
        top_k: i("top_k"),
        top_p: f("top_p"),
        min_p: f("min_p"),
        repeat_penalty: f("repeat_penalty"),
        presence_penalty: f("presence_penalty"),
        frequency_penalty: f("frequency_penalty"),
        repeat_last_n: i("repeat_last_n"),
        seed: i("seed"),
    }
}

/// Checks a body's keys and types (`null` allowed: it unsets the key).
fn check_body(body: &Map<String, Value>) -> Result<Vec<(String, Option<Value>)>, ApiError> {
    let mut out = Vec::new();
    for (k, v) in body {
        let Some((_, kind)) = SCHEMA.iter().find(|(name, _)| name == k) else {
            let known: Vec<&str> = SCHEMA.iter().map(|(n, _)| *n).collect();
            return Err(ApiError::invalid(format!(
                "unknown setting {k:?}; the settings are: {}",
                known.join(", ")
            )));
        };
        let ok = match kind {
            _ if v.is_null() => true,
            Kind::Number => v.is_number(),
            Kind::Integer => v.is_i64(),
            Kind::Bool => v.is_boolean(),
            Kind::Text => v.is_string(),
        };
        if !ok {
            let want = match kind {
                Kind::Number => "a number",
                Kind::Integer => "an integer",
                Kind::Bool => "true or false",
                Kind::Text => "a string",
            };
            return Err(ApiError::invalid(format!(
                "setting {k} must be {want} or null"
            )));
        }
        out.push((k.clone(), (!v.is_null()).then(|| v.clone())));
    }
    Ok(out)
}

/// Checks the values of the settings that would result (the sampler's own checks, and the
/// log filter's syntax).
fn check_ranges(m: &Map<String, Value>) -> Result<SamplingFields, ApiError> {
    let s = sampling_of(m);
    let none = SamplingFields::default();
    resolve_with(&none, &none, Precedence::Operator, &s, BTreeMap::new())?;
    for (key, most) in [
        ("max_tokens", 1 << 20),
        ("queue_size", 1 << 16),
        ("audit_retention_days", 36_500),
        ("audit_retention_rows", 1 << 40),
    ] {
        if let Some(n) = m.get(key).and_then(Value::as_i64) {
            if !(1..=most).contains(&n) {
                return Err(ApiError::invalid(format!(
                    "{key} must be between 1 and {most}, got {n}"
                )));
            }
        }
    }
    if let Some(level) = m.get("logging_level").and_then(Value::as_str) {
        logging::check_filter(level)
            .map_err(|e| ApiError::invalid(format!("logging_level: {e}")))?;
    }
    Ok(s)
}

/// Makes the settings live: sampling defaults, limits, moderation on/off, the log filter.
fn apply(st: &AdminState, m: &Map<String, Value>, sampling: SamplingFields) {
    st.inference.set_defaults(sampling);
    let count = |k: &str| m.get(k).and_then(Value::as_u64).map(|n| n as usize);
    st.inference.set_max_tokens(count("max_tokens"));
    st.registry.set_queue_size(count("queue_size"));
    st.auth
        .set_metrics_public(m.get("metrics_public").and_then(Value::as_bool) == Some(true));
    st.moderation
        .set_enabled(m.get("moderation").and_then(Value::as_bool));
    let level = m.get("logging_level").and_then(Value::as_str);
    if let Err(e) = logging::set_filter(level) {
        tracing::warn!(error = %e, "applying logging_level");
    }
}

/// Every setting, `null` when unset.
fn render(m: &Map<String, Value>) -> Value {
    let all: Map<String, Value> = SCHEMA
        .iter()
        .map(|(k, _)| (k.to_string(), m.get(*k).cloned().unwrap_or(Value::Null)))
        .collect();
    Value::Object(all)
}

/// Reads the settings from the database into the live defaults.
pub async fn reload(st: &AdminState) -> Result<(), ApiError> {
    let m = st.storage.settings().await?;
    apply(st, &m, sampling_of(&m));
    Ok(())
}

/// Removes the audit rows past the retention settings.
async fn prune_audit(st: &AdminState, m: &Map<String, Value>) {
    let days = m
        .get("audit_retention_days")
        .and_then(Value::as_i64)
        .unwrap_or(AUDIT_DAYS);
    let rows = m
        .get("audit_retention_rows")
        .and_then(Value::as_i64)
        .unwrap_or(AUDIT_ROWS);
    match st
        .storage
        .prune_audit(Some(days.saturating_mul(86_400)), Some(rows))
        .await
    {
        Ok(0) => {}
        Ok(n) => tracing::info!(rows = n, "audit log pruned to its retention"),
        Err(e) => tracing::warn!(error = %e, "pruning the audit log"),
    }
}

/// Polls the database for settings changed by another replica, and prunes the audit log
/// every [`PRUNE_EVERY`] (at start-up first).
pub fn spawn_sync(st: AdminState) {
    tokio::spawn(async move {
        let mut last = None;
        let mut pruned: Option<std::time::Instant> = None;
        loop {
            if pruned.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
                if let Ok(m) = st.storage.settings().await {
                    prune_audit(&st, &m).await;
                }
                pruned = Some(std::time::Instant::now());
            }
            match st.storage.settings_stamp().await {
                Ok(stamp) if last != Some(stamp) => {
                    if let Err(e) = reload(&st).await {
                        tracing::warn!(error = %e.message, "reloading settings");
                    } else {
                        last = Some(stamp);
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "polling settings"),
            }
            tokio::time::sleep(POLL).await;
        }
    });
}

async fn write(st: &AdminState, body: Value, replace: bool) -> Changed<Value> {
    let body = body
        .as_object()
        .ok_or_else(|| ApiError::invalid("the body must be a JSON object of settings"))?;
    let changes = check_body(body)?;
    let mut next = if replace {
        Map::new()
    } else {
        st.storage.settings().await?
    };
    for (k, v) in &changes {
        match v {
            Some(v) => next.insert(k.clone(), v.clone()),
            None => next.remove(k),
        };
    }
    let sampling = check_ranges(&next)?;
    st.storage.write_settings(&changes, replace).await?;
    apply(st, &next, sampling);
    if changes
        .iter()
        .any(|(k, _)| k.starts_with("audit_retention_"))
    {
        prune_audit(st, &next).await;
    }
    let keys: Vec<&String> = changes.iter().map(|(k, _)| k).collect();
    // Setting values are not secret; naming the keys is enough to trace a change.
    changed(
        StatusCode::OK,
        json!({"keys": keys, "replace": replace}),
        render(&next),
    )
}

/// The current settings (every key; `null` when unset).
#[utoipa::path(get, path = "/settings", tag = "admin",
    responses((status = 200, description = "Every setting", body = Object),
              (status = 403, body = PlainErrorBody)))]
async fn get_settings(State(st): State<AdminState>) -> Result<Json<Value>, PlainError> {
    Ok(Json(render(&st.storage.settings().await?)))
}

/// Replaces every setting (keys not given are unset).
#[utoipa::path(post, path = "/settings", tag = "admin",
    request_body(content = Object, description = "Settings: temperature, top_k, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty, repeat_last_n, seed (numbers); moderation (boolean); logging_level (an env-filter directive); audit_retention_days, audit_retention_rows (integers)"),
    responses((status = 200, body = Object), (status = 400, body = PlainErrorBody)))]
async fn replace(State(st): State<AdminState>, ApiJson(b): ApiJson<Value>) -> Changed<Value> {
    write(&st, b, true).await
}

/// Changes the settings given (`null` unsets one); the others stay.
#[utoipa::path(patch, path = "/settings", tag = "admin",
    request_body(content = Object, description = "Some settings"),
    responses((status = 200, body = Object), (status = 400, body = PlainErrorBody)))]
async fn patch(State(st): State<AdminState>, ApiJson(b): ApiJson<Value>) -> Changed<Value> {
    write(&st, b, false).await
}
