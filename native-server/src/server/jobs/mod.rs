//! Model jobs over HTTP: `POST /api/v1/models/pull|import|quantize|convert` start a job and answer
//! 202 with it, `GET /api/v1/models/jobs/{job_id}` and `GET /api/v1/jobs` show jobs,
//! `POST /api/v1/jobs/{id}/cancel` stops one, and Ollama's `POST /api/pull` streams a pull's
//! progress as NDJSON (`status`, `digest`, `total`, `completed`). A finished job's model is
//! added to the registry at once. Requests that are wrong on their face (no reference, a bad
//! name, an unknown type, a path outside the import roots) get a 400 before any job starts;
//! what can only fail while working (404 at the hub, a sha256 mismatch, a full disk) fails
//! the job with that message. Without a models directory these routes answer 503.
//!
//! Jobs are kept in the admin storage (`persist.rs`): the list survives a restart, and replicas
//! sharing a database list, show and cancel each other's jobs.
//!
//! Files: `work.rs` (the jobs' work and the registry hook), `persist.rs` (the database copy,
//! cancel across replicas, interrupted jobs), `ollama_pull.rs`, `ollama_create.rs` (blobs and
//! `/api/create` with files).

mod ollama_create;
mod ollama_pull;
mod persist;
mod work;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, PlainError, PlainErrorBody};
use super::extract::ApiJson;
use super::state::Shared;
use crate::store::{ConvertRequest, ImportRequest, PullRequest, QuantizeRequest};
pub use ollama_create::create_from_files;
pub use work::ModelJobs;

type Res<T> = Result<T, PlainError>;

/// Routes relative to `/api/v1`.
pub fn admin_routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new()
        .routes(routes!(pull))
        .routes(routes!(import))
        .routes(routes!(quantize))
        .routes(routes!(convert))
        .routes(routes!(job))
        .routes(routes!(list))
        .routes(routes!(cancel))
}

/// Ollama's `/pull`, relative to `/api`.
pub fn ollama_routes() -> crate::server::auth::Routes {
    crate::server::auth::Routes::admin(
        OpenApiRouter::new()
            .routes(routes!(ollama_pull::pull))
            .routes(routes!(
                ollama_create::blob_exists,
                ollama_create::blob_upload
            )),
    )
}

/// A job, as the job runner reports it (id, kind, phase, progress, times, status, error).
#[derive(Debug, Serialize, ToSchema)]
pub struct JobAccepted {
    #[schema(value_type = Object)]
    pub job: crate::jobs::Job,
    pub job_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct JobList {
    #[schema(value_type = Vec<Object>)]
    pub jobs: Vec<crate::jobs::Job>,
}

fn accepted(job: crate::jobs::Job) -> (StatusCode, Json<JobAccepted>) {
    let job_id = job.id.clone();
    (StatusCode::ACCEPTED, Json(JobAccepted { job, job_id }))
}

type Started = Res<(StatusCode, Json<JobAccepted>)>;

#[utoipa::path(post, path = "/models/pull", tag = "admin",
    request_body(content = inline(Object), description = "{model: URL or hf.co/OWNER/REPO:FILE, name?, sha256?}"),
    responses((status = 202, body = JobAccepted), (status = 400, body = PlainErrorBody),
              (status = 503, body = PlainErrorBody)))]
async fn pull(State(st): State<Shared>, ApiJson(req): ApiJson<PullRequest>) -> Started {
    Ok(accepted(st.jobs()?.submit_pull(req)?))
}

#[utoipa::path(post, path = "/models/import", tag = "admin",
    request_body(content = inline(Object), description = "{path, name?}"),
    responses((status = 202, body = JobAccepted), (status = 400, body = PlainErrorBody)))]
async fn import(State(st): State<Shared>, ApiJson(req): ApiJson<ImportRequest>) -> Started {
    Ok(accepted(st.jobs()?.submit_import(req)?))
}

#[utoipa::path(post, path = "/models/quantize", tag = "admin",
    request_body(content = inline(Object), description = "{model, name, type, allow_requantize?}"),
    responses((status = 202, body = JobAccepted), (status = 400, body = PlainErrorBody)))]
async fn quantize(State(st): State<Shared>, ApiJson(req): ApiJson<QuantizeRequest>) -> Started {
    Ok(accepted(st.jobs()?.submit_quantize(req)?))
}

#[utoipa::path(post, path = "/models/convert", tag = "admin",
    request_body(content = inline(Object), description = "{path: a Hugging Face folder inside the import roots, name?, type? (default F16)}"),
    responses((status = 202, body = JobAccepted), (status = 400, body = PlainErrorBody)))]
async fn convert(State(st): State<Shared>, ApiJson(req): ApiJson<ConvertRequest>) -> Started {
    Ok(accepted(st.jobs()?.submit_convert(req)?))
}

fn missing(id: &str) -> PlainError {
    PlainError(ApiError::not_found(format!("no job {id:?}")))
}

#[utoipa::path(get, path = "/models/jobs/{job_id}", tag = "admin",
    params(("job_id" = String, Path, description = "A job id")),
    responses((status = 200, body = Object), (status = 404, body = PlainErrorBody)))]
async fn job(State(st): State<Shared>, Path(id): Path<String>) -> Res<Json<Value>> {
    let job = st.jobs()?.job(&id).await?.ok_or_else(|| missing(&id))?;
    Ok(Json(serde_json::to_value(job).unwrap_or_default()))
}

#[utoipa::path(get, path = "/jobs", tag = "admin", responses((status = 200, body = JobList)))]
async fn list(State(st): State<Shared>) -> Res<Json<JobList>> {
    Ok(Json(JobList {
        jobs: st.jobs()?.list().await?,
    }))
}

#[utoipa::path(post, path = "/jobs/{id}/cancel", tag = "admin",
    params(("id" = String, Path, description = "A job id")),
    responses((status = 200, body = Object), (status = 404, body = PlainErrorBody)))]
async fn cancel(State(st): State<Shared>, Path(id): Path<String>) -> Res<Json<Value>> {
    let job = st.jobs()?.cancel(&id).await?.ok_or_else(|| missing(&id))?;
    Ok(Json(serde_json::to_value(job).unwrap_or_default()))
}
