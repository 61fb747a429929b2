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
//! Each job records the principal that started it (its `owner`), and only that principal sees
//! it: another one's job id is a 404 like an unknown one, and the list holds the caller's own
//! jobs. An admin reaches everyone's only by asking: `?owner=all` (or `?owner=KEY_ID`) on the
//! list, the job and its cancel.
//!
//! Files: `work.rs` (the jobs' work and the registry hook), `persist.rs` (the database copy,
//! cancel across replicas, interrupted jobs), `ollama_pull.rs`, `ollama_create.rs` (blobs and
//! `/api/create` with files).

mod ollama_create;
mod ollama_pull;
mod persist;
mod state;
mod work;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::caller::Caller;
use super::error::{ApiError, PlainError, PlainErrorBody};
use super::extract::ApiJson;
use crate::server::auth::RouterState;
use crate::store::{ConvertRequest, ImportRequest, PullRequest, QuantizeRequest};
use axum::extract::FromRef;
pub use ollama_create::create_from_files;
pub use persist::Whose;
pub use state::{required, JobsState};
pub use work::ModelJobs;

type Res<T> = Result<T, PlainError>;

/// Routes relative to `/api/v1`.
pub fn admin_routes<S: RouterState>() -> OpenApiRouter<S>
where
    JobsState: FromRef<S>,
{
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
pub fn ollama_routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    JobsState: FromRef<S>,
{
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

/// Submits a job and answers 202 once it is in the database (where there is one), so that
/// another replica asked right after lists it.
async fn started(
    st: &JobsState,
    submit: impl FnOnce(&ModelJobs) -> Result<crate::jobs::Job, ApiError>,
) -> Started {
    let jobs = st.jobs()?;
    let job = submit(jobs)?;
    jobs.flush().await;
    let job_id = job.id.clone();
    Ok((StatusCode::ACCEPTED, Json(JobAccepted { job, job_id })))
}

type Started = Res<(StatusCode, Json<JobAccepted>)>;

#[utoipa::path(post, path = "/models/pull", tag = "admin",
    request_body(content = inline(Object), description = "{model: URL or hf.co/OWNER/REPO:FILE, name?, sha256?}"),
    responses((status = 202, body = JobAccepted), (status = 400, body = PlainErrorBody),
              (status = 503, body = PlainErrorBody)))]
async fn pull(
    State(st): State<JobsState>,
    c: Caller,
    ApiJson(req): ApiJson<PullRequest>,
) -> Started {
    started(&st, |j| j.submit_pull(c.owner(), req)).await
}

#[utoipa::path(post, path = "/models/import", tag = "admin",
    request_body(content = inline(Object), description = "{path, name?}"),
    responses((status = 202, body = JobAccepted), (status = 400, body = PlainErrorBody)))]
async fn import(
    State(st): State<JobsState>,
    c: Caller,
    ApiJson(req): ApiJson<ImportRequest>,
) -> Started {
    started(&st, |j| j.submit_import(c.owner(), req)).await
}

#[utoipa::path(post, path = "/models/quantize", tag = "admin",
    request_body(content = inline(Object), description = "{model, name, type, allow_requantize?}"),
    responses((status = 202, body = JobAccepted), (status = 400, body = PlainErrorBody)))]
async fn quantize(
    State(st): State<JobsState>,
    c: Caller,
    ApiJson(req): ApiJson<QuantizeRequest>,
) -> Started {
    started(&st, |j| j.submit_quantize(c.owner(), req)).await
}

#[utoipa::path(post, path = "/models/convert", tag = "admin",
    request_body(content = inline(Object), description = "{path: a Hugging Face folder inside the import roots, name?, type? (default F16)}"),
    responses((status = 202, body = JobAccepted), (status = 400, body = PlainErrorBody)))]
async fn convert(
    State(st): State<JobsState>,
    c: Caller,
    ApiJson(req): ApiJson<ConvertRequest>,
) -> Started {
    started(&st, |j| j.submit_convert(c.owner(), req)).await
}

fn missing(id: &str) -> PlainError {
    PlainError(ApiError::not_found(format!("no job {id:?}")))
}

/// `?owner=` of the job routes: whose jobs an admin reaches besides its own.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OwnerQuery {
    /// `all`: every principal's jobs; a key id (or `env`, `open`): that principal's. Admins
    /// only; without it, the caller's own jobs.
    pub owner: Option<String>,
}

impl OwnerQuery {
    /// Whose jobs `caller` reaches with this filter (403 for a filter from a non-admin).
    pub fn whose(&self, caller: &Caller) -> Result<Whose, ApiError> {
        match self.owner.as_deref().filter(|o| !o.is_empty()) {
            None => Ok(Whose::Of(caller.owner().to_string())),
            Some(o) if caller.owns(o) => Ok(Whose::Of(o.to_string())),
            Some(_) if !caller.is_admin() => Err(ApiError::forbidden(
                "only an admin may reach other principals' jobs (?owner=)",
            )),
            Some("all") => Ok(Whose::All),
            Some(o) => Ok(Whose::Of(o.to_string())),
        }
    }
}

#[utoipa::path(get, path = "/models/jobs/{job_id}", tag = "admin",
    params(("job_id" = String, Path, description = "A job id"), OwnerQuery),
    responses((status = 200, body = Object), (status = 404, body = PlainErrorBody)))]
async fn job(
    State(st): State<JobsState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<OwnerQuery>,
) -> Res<Json<Value>> {
    let whose = q.whose(&caller)?;
    let job = st
        .jobs()?
        .job(&whose, &id)
        .await?
        .ok_or_else(|| missing(&id))?;
    Ok(Json(serde_json::to_value(job).unwrap_or_default()))
}

#[utoipa::path(get, path = "/jobs", tag = "admin", params(OwnerQuery),
    responses((status = 200, body = JobList), (status = 403, body = PlainErrorBody)))]
async fn list(
    State(st): State<JobsState>,
    caller: Caller,
    Query(q): Query<OwnerQuery>,
) -> Res<Json<JobList>> {
    let whose = q.whose(&caller)?;
    Ok(Json(JobList {
        jobs: st.jobs()?.list(&whose).await?,
    }))
}

#[utoipa::path(post, path = "/jobs/{id}/cancel", tag = "admin",
    params(("id" = String, Path, description = "A job id"), OwnerQuery),
    responses((status = 200, body = Object), (status = 404, body = PlainErrorBody)))]
async fn cancel(
    State(st): State<JobsState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<OwnerQuery>,
) -> Res<Json<Value>> {
    let whose = q.whose(&caller)?;
    let job = st
        .jobs()?
        .cancel(&whose, &id)
        .await?
        .ok_or_else(|| missing(&id))?;
    Ok(Json(serde_json::to_value(job).unwrap_or_default()))
}
