//! Model jobs over HTTP: `POST /api/v1/models/pull|import|quantize` start a job and answer
//! 202 with it, `GET /api/v1/models/jobs/{job_id}` and `GET /api/v1/jobs` show jobs,
//! `POST /api/v1/jobs/{id}/cancel` stops one, and Ollama's `POST /api/pull` streams a pull's
//! progress as NDJSON (`status`, `digest`, `total`, `completed`). A finished job's model is
//! added to the registry at once. Requests that are wrong on their face (no reference, a bad
//! name, an unknown type, a path outside the import roots) get a 400 before any job starts;
//! what can only fail while working (404 at the hub, a sha256 mismatch, a full disk) fails
//! the job with that message.
//!
//! Files: `work.rs` (the jobs' work and the registry hook), `ollama_pull.rs`.

mod ollama_pull;
mod work;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use super::body::parse;
use super::error::{ApiError, PlainError};
use crate::store::{ImportRequest, PullRequest, QuantizeRequest};
pub use work::ModelJobs;

type Res = Result<Response, PlainError>;

/// The job routes, with their own state (merge them into the server's router).
pub fn routes(jobs: Arc<ModelJobs>) -> Router {
    Router::new()
        .route("/api/v1/models/pull", post(pull))
        .route("/api/v1/models/import", post(import))
        .route("/api/v1/models/quantize", post(quantize))
        .route("/api/v1/models/jobs/{job_id}", get(job))
        .route("/api/v1/jobs", get(list))
        .route("/api/v1/jobs/{id}/cancel", post(cancel))
        .route("/api/pull", post(ollama_pull::pull))
        .with_state(jobs)
}

fn accepted(job: crate::jobs::Job) -> Response {
    (
        StatusCode::ACCEPTED,
        Json(json!({"job": job, "job_id": job.id})),
    )
        .into_response()
}

async fn pull(State(j): State<Arc<ModelJobs>>, body: Result<Bytes, BytesRejection>) -> Res {
    let req: PullRequest = parse(body)?;
    Ok(accepted(j.submit_pull(req)?))
}

async fn import(State(j): State<Arc<ModelJobs>>, body: Result<Bytes, BytesRejection>) -> Res {
    let req: ImportRequest = parse(body)?;
    Ok(accepted(j.submit_import(req)?))
}

async fn quantize(State(j): State<Arc<ModelJobs>>, body: Result<Bytes, BytesRejection>) -> Res {
    let req: QuantizeRequest = parse(body)?;
    Ok(accepted(j.submit_quantize(req)?))
}

fn missing(id: &str) -> PlainError {
    PlainError(ApiError::not_found(format!("no job {id:?}")))
}

async fn job(State(j): State<Arc<ModelJobs>>, Path(id): Path<String>) -> Res {
    let job = j.runner.get(&id).ok_or_else(|| missing(&id))?;
    Ok(Json(job).into_response())
}

async fn list(State(j): State<Arc<ModelJobs>>) -> Response {
    Json(json!({"jobs": j.runner.list()})).into_response()
}

async fn cancel(State(j): State<Arc<ModelJobs>>, Path(id): Path<String>) -> Res {
    let job = j.runner.cancel(&id).ok_or_else(|| missing(&id))?;
    Ok(Json(job).into_response())
}
