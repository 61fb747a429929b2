//! The three video routes: check the body (400s before anything is queued), queue the
//! generation as a job, then answer when it ends (or stream its progress).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use base64::Engine;
use futures_util::stream;
use serde_json::{json, Value};

use super::request::prepare;
use super::run::submit;
use super::types::{OpenAiVideoBody, OpenAiVideoData, OpenAiVideoReply, VideoBody, VideoReply};
use super::{VideoService, VideoState, NOT_A_VIDEO_MODEL};
use crate::jobs::{Job, JobStatus};
use crate::server::auth::caller::Caller;
use crate::server::conversations::default_session;
use crate::server::error::{ApiError, OpenAiError, OpenAiErrorBody, PlainError, PlainErrorBody};
use crate::server::extract::{ApiJson, OpenAiJson};
use crate::server::stream::{json_frame, sse};

/// The longest a request waits for its generation (a queue of long generations included).
const WAIT: Duration = Duration::from_secs(24 * 3600);

fn service(st: &VideoState) -> Result<&Arc<VideoService>, ApiError> {
    st.video
        .as_ref()
        .ok_or_else(|| ApiError::invalid(NOT_A_VIDEO_MODEL))
}

/// Checks and queues a generation; returns the service and the queued job.
async fn start(
    st: &VideoState,
    caller: &Caller,
    body: VideoBody,
    size: Option<&str>,
) -> Result<(Arc<VideoService>, Job), ApiError> {
    let svc = service(st)?.clone();
    let owner = caller.owner();
    if let Some(sid) = body.session_id.as_deref().filter(|s| !s.is_empty()) {
        let known = sid == default_session(owner) || st.sessions.exists(owner, sid).await?;
        if !known {
            return Err(ApiError::not_found("no such session"));
        }
    }
    let store = st.uploads.store.clone();
    let p = prepare(&svc, &store, caller.owner(), body, size)?;
    let job = submit(&svc, store, caller.owner(), p);
    Ok((svc, job))
}

/// Waits for the job to end: its reply, or the error it ended with.
async fn finish(svc: Arc<VideoService>, id: String) -> Result<VideoReply, ApiError> {
    let runner = svc.runner.clone();
    let job = tokio::task::spawn_blocking(move || runner.wait(&id, WAIT))
        .await
        .ok()
        .flatten()
        .ok_or_else(|| ApiError::internal("the generation's job is gone"))?;
    match job.status {
        JobStatus::Succeeded => job
            .result
            .and_then(|v| serde_json::from_value(v).ok())
            .ok_or_else(|| ApiError::internal("the generation left no result")),
        JobStatus::Cancelled => Err(ApiError::conflict("the generation was cancelled")),
        JobStatus::Failed => Err(ApiError::internal(
            job.error.unwrap_or_else(|| "the generation failed".into()),
        )),
        JobStatus::Queued | JobStatus::Running => Err(ApiError::unavailable(
            "the generation did not finish in time",
        )),
    }
}

#[utoipa::path(post, path = "/video-generate", tag = "video", request_body = VideoBody,
    responses((status = 200, body = VideoReply),
              (status = 400, body = PlainErrorBody,
               description = "A bad request, or the served model makes no video"),
              (status = 409, body = PlainErrorBody, description = "Cancelled")))]
pub async fn video_generate(
    State(st): State<VideoState>,
    caller: Caller,
    ApiJson(body): ApiJson<VideoBody>,
) -> Result<Json<VideoReply>, PlainError> {
    let (svc, job) = start(&st, &caller, body, None).await?;
    Ok(Json(finish(svc, job.id).await?))
}

#[utoipa::path(post, path = "/videos/generations", tag = "openai", request_body = OpenAiVideoBody,
    responses((status = 200, body = OpenAiVideoReply),
              (status = 400, body = OpenAiErrorBody)))]
pub async fn videos_generations(
    State(st): State<VideoState>,
    caller: Caller,
    OpenAiJson(body): OpenAiJson<OpenAiVideoBody>,
) -> Result<Json<OpenAiVideoReply>, OpenAiError> {
    let inline = match body.response_format.as_deref() {
        None | Some("url") => false,
        Some("b64_json") => true,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "response_format {other:?} is not url or b64_json"
            ))
            .into())
        }
    };
    let mut common = body.common;
    if common.negative_prompt.is_none() {
        common.negative_prompt = body.negative_prompt;
    }
    let (svc, job) = start(&st, &caller, common, body.size.as_deref()).await?;
    let reply = finish(svc, job.id).await?;
    let data = if inline {
        let name = reply
            .url
            .trim_start_matches("/uploads/")
            .split('?')
            .next()
            .unwrap_or("")
            .to_string();
        let store = st.uploads.store.clone();
        let owner = caller.owner().to_string();
        let session = reply
            .url
            .split_once("?sessionId=")
            .map(|(_, s)| percent_decode(s))
            .unwrap_or_else(|| default_session(&owner));
        let bytes = tokio::task::spawn_blocking(move || {
            let (path, _) = store.find(&owner, &session, &name)?;
            std::fs::read(path).ok()
        })
        .await
        .ok()
        .flatten()
        .ok_or_else(|| ApiError::internal("the stored video could not be read back"))?;
        OpenAiVideoData {
            url: None,
            b64_json: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
        }
    } else {
        OpenAiVideoData {
            url: Some(reply.url.clone()),
            b64_json: None,
        }
    };
    Ok(Json(OpenAiVideoReply {
        created: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        data: vec![data],
        audio_url: None,
        width: reply.width,
        height: reply.height,
        frames: reply.frames,
        fps: reply.fps,
        seed: reply.seed,
        codec: reply.codec,
        elapsed_seconds: reply.elapsed_seconds,
    }))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A `videoGen` tick for the job as it is now, or None before the pipeline reported.
fn tick(job: &Job, started: Instant) -> Option<(Value, (String, u64, u64))> {
    let v = job.detail.get("video")?;
    let phase = v["phase"].as_str()?.to_string();
    let (step, total) = (v["step"].as_u64()?, v["total"].as_u64()?);
    let elapsed = started.elapsed().as_secs_f64();
    let eta = (phase == "denoise" && step > 0)
        .then(|| elapsed / step as f64 * (total - step.min(total)) as f64);
    let frame = json!({
        "videoGen": true, "step": step, "total": total, "phase": phase, "detail": null,
        "elapsedSeconds": elapsed, "etaSeconds": eta, "jobId": job.id,
    });
    Some((frame, (phase, step, total)))
}

#[utoipa::path(post, path = "/video-generate/stream", tag = "video", request_body = VideoBody,
    responses((status = 200, description = "SSE: videoGen ticks, then a done frame (or done with error)"),
              (status = 400, body = PlainErrorBody)))]
pub async fn video_generate_stream(
    State(st): State<VideoState>,
    caller: Caller,
    ApiJson(body): ApiJson<VideoBody>,
) -> Result<Response, PlainError> {
    let (svc, job) = start(&st, &caller, body, None).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<String>(64);
    let runner = svc.runner.clone();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let send = |v: &Value| tx.blocking_send(json_frame(v)).is_ok();
        let (mut seen, mut last) = (job.version, None);
        loop {
            let Some(cur) = runner.wait_change(&job.id, seen, WAIT) else {
                return;
            };
            seen = cur.version;
            if let Some((frame, key)) = tick(&cur, started) {
                if last.as_ref() != Some(&key) {
                    last = Some(key);
                    if !send(&frame) {
                        // The client left: nobody will fetch the video.
                        runner.cancel(&job.id);
                        return;
                    }
                }
            }
            if !cur.status.is_final() {
                continue;
            }
            let end = match (&cur.status, &cur.result) {
                (JobStatus::Succeeded, Some(result)) => {
                    let mut done = result.clone();
                    let total = done["frames"].clone();
                    send(&json!({"videoGen": true, "phase": "done", "step": total,
                                 "total": total, "detail": null, "jobId": cur.id,
                                 "elapsedSeconds": started.elapsed().as_secs_f64(),
                                 "etaSeconds": 0}));
                    done["done"] = json!(true);
                    done
                }
                _ => json!({"done": true,
                            "error": cur.error.clone().unwrap_or_else(|| "failed".into())}),
            };
            send(&end);
            return;
        }
    });
    let frames = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|l| (l, rx)) });
    Ok(sse(frames))
}
