//! Ollama's `POST /api/pull`: starts a pull job and streams its progress as Ollama does
//! (`{"status": "pulling manifest"}`, then `{"status": "pulling <digest>", "digest",
//! "total", "completed"}` lines, `verifying sha256 digest`, `writing manifest`,
//! `success`), or answers once at the end with `"stream": false`. The job goes on if the
//! client goes away.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use futures_util::stream;
use serde::Deserialize;
use serde_json::{json, Value};

use super::super::body::{ndjson, parse};
use super::super::error::PlainError;
use super::{ModelJobs, Res};
use crate::jobs::{Job, JobStatus};
use crate::store::PullRequest;

#[derive(Deserialize)]
struct PullBody {
    #[serde(alias = "name")]
    model: String,
    #[serde(default)]
    stream: Option<bool>,
    /// Ollama's flag for registries without TLS; plain http URLs work regardless.
    #[serde(default)]
    #[allow(dead_code)]
    insecure: Option<bool>,
    /// Weft's additions.
    #[serde(default)]
    sha256: Option<String>,
    #[serde(default, rename = "as")]
    save_as: Option<String>,
}

/// The Ollama line for a job's state, or None when nothing new is worth a line.
fn line(j: &Job) -> Option<Value> {
    match j.status {
        JobStatus::Succeeded => None,
        JobStatus::Failed | JobStatus::Cancelled => {
            Some(json!({"error": j.error.clone().unwrap_or_else(|| "failed".into())}))
        }
        _ => match j.phase.as_str() {
            "downloading" => {
                let digest = j.detail.get("digest").and_then(Value::as_str).unwrap_or("");
                let short = digest.trim_start_matches("sha256:").get(..12).unwrap_or("");
                Some(
                    json!({"status": format!("pulling {short}"), "digest": digest,
                            "total": j.progress.total, "completed": j.progress.done}),
                )
            }
            "verifying" => Some(json!({"status": "verifying sha256 digest"})),
            _ => None,
        },
    }
}

pub(super) async fn pull(
    State(jobs): State<Arc<ModelJobs>>,
    body: Result<Bytes, BytesRejection>,
) -> Res {
    let b: PullBody = parse(body)?;
    let job = jobs
        .submit_pull(PullRequest {
            reference: b.model,
            name: b.save_as,
            sha256: b.sha256,
        })
        .map_err(PlainError)?;
    let (tx, rx) = tokio::sync::mpsc::channel::<String>(64);
    let runner = jobs.runner.clone();
    tokio::task::spawn_blocking(move || {
        let send = |v: Value| tx.blocking_send(v.to_string()).is_ok();
        if !send(json!({"status": "pulling manifest"})) {
            return;
        }
        let mut seen = job.version;
        let mut last_sent = Instant::now() - Duration::from_secs(1);
        let mut last_phase = String::new();
        loop {
            let Some(cur) = runner.wait_change(&job.id, seen, Duration::from_secs(30)) else {
                return;
            };
            seen = cur.version;
            if cur.status == JobStatus::Succeeded {
                let _ = send(json!({"status": "writing manifest"}))
                    && send(json!({"status": "success"}));
                return;
            }
            let phase_changed = cur.phase != last_phase;
            // At most ten progress lines a second (a line per received chunk is far too many).
            if !(phase_changed
                || cur.status.is_final()
                || last_sent.elapsed() >= Duration::from_millis(100))
            {
                continue;
            }
            last_phase.clone_from(&cur.phase);
            if let Some(v) = line(&cur) {
                last_sent = Instant::now();
                if !send(v) {
                    return; // the client left; the job goes on
                }
            }
            if cur.status.is_final() {
                return;
            }
        }
    });
    let lines = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|l| (l, rx)) });
    if b.stream.unwrap_or(true) {
        return Ok(ndjson(lines));
    }
    use futures_util::StreamExt;
    let all: Vec<String> = lines.collect().await;
    let last: Value = all
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| json!({"error": "the pull ended without a result"}));
    if let Some(e) = last.get("error").and_then(Value::as_str) {
        return Err(PlainError(super::super::error::ApiError::invalid(e)));
    }
    Ok(Json(last).into_response())
}
