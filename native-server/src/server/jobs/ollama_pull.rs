//! Ollama's `POST /api/pull`: starts a pull job and streams its progress as Ollama does
//! (`{"status": "pulling manifest"}`, then `{"status": "pulling <digest>", "digest",
//! "total", "completed"}` lines, `verifying sha256 digest`, `writing manifest`,
//! `success`), or answers once at the end with `"stream": false`. The job goes on if the
//! client goes away.

use std::time::{Duration, Instant};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::Res;
use crate::jobs::{Job, JobStatus};
use crate::server::auth::caller::Caller;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::extract::ApiJson;
use crate::server::jobs::JobsState;
use crate::server::stream::{json_frame, ndjson};
use crate::store::PullRequest;

/// `POST /api/pull`.
#[derive(Deserialize, ToSchema)]
pub struct PullBody {
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

/// One NDJSON line of `/api/pull`, as Ollama writes them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct PullLine {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl PullLine {
    fn status(s: &str) -> PullLine {
        PullLine {
            status: Some(s.to_string()),
            ..Default::default()
        }
    }
}

/// The Ollama line for a job's state, or None when nothing new is worth a line.
fn line(j: &Job) -> Option<PullLine> {
    match j.status {
        JobStatus::Succeeded => None,
        JobStatus::Failed | JobStatus::Cancelled => Some(PullLine {
            error: Some(j.error.clone().unwrap_or_else(|| "failed".into())),
            ..Default::default()
        }),
        _ => match j.phase.as_str() {
            "downloading" => {
                let digest = j.detail.get("digest").and_then(Value::as_str).unwrap_or("");
                let short = digest.trim_start_matches("sha256:").get(..12).unwrap_or("");
                Some(PullLine {
                    status: Some(format!("pulling {short}")),
                    digest: Some(digest.to_string()),
                    total: Some(j.progress.total),
                    completed: Some(j.progress.done),
                    error: None,
                })
            }
            "verifying" => Some(PullLine::status("verifying sha256 digest")),
            _ => None,
        },
    }
}

#[utoipa::path(post, path = "/pull", tag = "ollama", request_body = PullBody,
    responses((status = 200, description = "NDJSON progress lines (status, digest, total, completed), or the last one when stream is false"),
              (status = 400, body = PlainErrorBody), (status = 503, body = PlainErrorBody)))]
pub(super) async fn pull(
    State(st): State<JobsState>,
    caller: Caller,
    ApiJson(b): ApiJson<PullBody>,
) -> Res<Response> {
    let jobs = st.jobs()?.clone();
    let job = jobs
        .submit_pull(
            caller.owner(),
            PullRequest {
                reference: b.model,
                name: b.save_as,
                sha256: b.sha256,
            },
        )
        .map_err(PlainError)?;
    let (tx, rx) = tokio::sync::mpsc::channel::<String>(64);
    let runner = jobs.runner.clone();
    tokio::task::spawn_blocking(move || {
        let send = |v: PullLine| tx.blocking_send(json_frame(&v)).is_ok();
        if !send(PullLine::status("pulling manifest")) {
            return;
        }
        let mut seen = job.version;
        let mut last_sent = Instant::now() - Duration::from_secs(1);
        let mut last_phase = String::new();
        // The newest download line, sent or not: when the download phase ends, the client
        // gets a last line with completed = total (throttling, or updates the runner merged,
        // may have hidden the final byte count).
        let mut download: Option<PullLine> = None;
        loop {
            let Some(cur) = runner.wait_change(&job.id, seen, Duration::from_secs(30)) else {
                return;
            };
            seen = cur.version;
            let phase_changed = cur.phase != last_phase;
            last_phase.clone_from(&cur.phase);
            let failed = matches!(cur.status, JobStatus::Failed | JobStatus::Cancelled);
            if cur.phase != "downloading" || cur.status.is_final() {
                if let Some(mut d) = download.take() {
                    if !failed {
                        d.completed = d.total;
                        if !send(d) {
                            return;
                        }
                    }
                }
            }
            if cur.status == JobStatus::Succeeded {
                let _ =
                    send(PullLine::status("writing manifest")) && send(PullLine::status("success"));
                return;
            }
            let Some(v) = line(&cur) else {
                continue;
            };
            // A download line before the size is known shows nothing; skipping it keeps the
            // throttle below from hiding the first line that has the size.
            if cur.phase == "downloading" && !cur.status.is_final() && cur.progress.total == 0 {
                continue;
            }
            if cur.phase == "downloading" && !cur.status.is_final() {
                download = Some(v.clone());
            }
            // At most ten progress lines a second (a line per received chunk is far too many).
            if !(phase_changed
                || cur.status.is_final()
                || last_sent.elapsed() >= Duration::from_millis(100))
            {
                continue;
            }
            last_sent = Instant::now();
            if !send(v) {
                return; // the client left; the job goes on
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
    let last: PullLine = all
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| PullLine {
            error: Some("the pull ended without a result".into()),
            ..Default::default()
        });
    if let Some(e) = last.error {
        return Err(PlainError(ApiError::invalid(e)));
    }
    Ok(Json(last).into_response())
}
