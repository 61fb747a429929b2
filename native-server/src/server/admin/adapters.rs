//! `/api/v1/adapters`: LoRA adapters registered against a base model. Metadata only: no small
//! real LoRA GGUF for the models Weft is tested with was found to build and test weight
//! merging against, so a request naming an adapter as its model is a 501
//! (`server/inference/admission.rs`). What registering checks: the base model is served, the file is
//! inside the models store, and it is a GGUF whose `general.type` is `adapter`.

use std::path::{Path as FsPath, PathBuf};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use weft_core::gguf::ModelFile;
use weft_storage::{Adapter, NewAdapter};

use super::common::{changed, check_name, Changed, List};
use crate::server::admin::AdminState;
use crate::server::auth::RouterState;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::extract::ApiJson;
use axum::extract::FromRef;

pub fn routes<S: RouterState>() -> OpenApiRouter<S>
where
    AdminState: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, delete_one))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AdapterInfo {
    pub id: String,
    pub name: String,
    pub base_model: String,
    /// The adapter's GGUF (absolute, inside the models store).
    pub path: String,
    pub scale: f64,
    pub created_at: i64,
}

impl From<Adapter> for AdapterInfo {
    fn from(a: Adapter) -> Self {
        AdapterInfo {
            id: a.id,
            name: a.name,
            base_model: a.base_model,
            path: a.path,
            scale: a.scale,
            created_at: a.created_at,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAdapter {
    /// What requests would name it by (must not be a served model's name).
    pub name: String,
    /// The served model the adapter was trained on.
    pub base_model: String,
    /// The adapter's GGUF: relative to the models store, or absolute inside it.
    pub path: String,
    /// How strongly the adapter would be applied (default 1.0).
    pub scale: Option<f64>,
}

#[utoipa::path(get, path = "/adapters", tag = "admin",
    responses((status = 200, body = List<AdapterInfo>), (status = 403, body = PlainErrorBody)))]
async fn list(State(st): State<AdminState>) -> Result<Json<List<AdapterInfo>>, PlainError> {
    let data = st.storage.list_adapters().await?;
    Ok(Json(List {
        data: data.into_iter().map(AdapterInfo::from).collect(),
    }))
}

/// The adapter file, canonical and inside `store`, or a 400 saying why not.
fn adapter_file(store: &FsPath, given: &str) -> Result<PathBuf, ApiError> {
    if given.trim().is_empty() {
        return Err(ApiError::invalid(
            "path must name the adapter's GGUF in the models store",
        ));
    }
    let root = store
        .canonicalize()
        .map_err(|e| ApiError::invalid(format!("the models store is unreadable: {e}")))?;
    let p = FsPath::new(given.trim());
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    };
    let real = full.canonicalize().map_err(|_| {
        ApiError::invalid(format!("path {given:?}: no such file in the models store"))
    })?;
    if !real.starts_with(&root) {
        return Err(ApiError::invalid(format!(
            "path {given:?} is outside the models store ({})",
            root.display()
        )));
    }
    if !real.is_file() {
        return Err(ApiError::invalid(format!("path {given:?} is not a file")));
    }
    let f = ModelFile::open(&real)
        .map_err(|e| ApiError::invalid(format!("path {given:?} is not a GGUF file: {e}")))?;
    match f.gguf.get_str("general.type") {
        Some("adapter") => Ok(real),
        other => Err(ApiError::invalid(format!(
            "path {given:?} is not a LoRA adapter: its general.type is {}, not \"adapter\"",
            other.map_or_else(|| "missing".to_string(), |t| format!("{t:?}"))
        ))),
    }
}

#[utoipa::path(post, path = "/adapters", tag = "admin", request_body = CreateAdapter,
    responses((status = 201, body = AdapterInfo), (status = 400, body = PlainErrorBody),
              (status = 409, body = PlainErrorBody)))]
async fn create(
    State(st): State<AdminState>,
    ApiJson(b): ApiJson<CreateAdapter>,
) -> Changed<AdapterInfo> {
    let name = check_name("adapter", &b.name)?;
    if name.starts_with(crate::server::inference::admission::AB_PREFIX) {
        return Err(ApiError::invalid("an adapter's name may not start with \"ab:\"").into());
    }
    if st.registry.with_catalog(|c| c.find(&name)).is_some() {
        return Err(
            ApiError::conflict(format!("{name:?} is already a served model's name")).into(),
        );
    }
    let base_model = st
        .registry
        .with_catalog(|c| c.find(&b.base_model))
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "base_model {:?} is not a model this server serves (see GET /v1/models)",
                b.base_model
            ))
        })?;
    let scale = b.scale.unwrap_or(1.0);
    if !scale.is_finite() {
        return Err(ApiError::invalid("scale must be a finite number").into());
    }
    let store = st.jobs.as_ref().map(|j| j.store.dir.clone()).ok_or_else(|| {
        ApiError::invalid("adapters live in the models store, and this server has none: start it with --models-dir")
    })?;
    let path = tokio::task::spawn_blocking({
        let given = b.path.clone();
        move || adapter_file(&store, &given)
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))??;
    let a = st
        .storage
        .create_adapter(NewAdapter {
            name,
            base_model,
            path: path.display().to_string(),
            scale,
        })
        .await?;
    let details = json!({"adapter_id": a.id, "name": a.name});
    changed(StatusCode::CREATED, details, AdapterInfo::from(a))
}

#[utoipa::path(get, path = "/adapters/{id}", tag = "admin",
    params(("id" = String, Path, description = "The adapter's id")),
    responses((status = 200, body = AdapterInfo), (status = 404, body = PlainErrorBody)))]
async fn get_one(
    State(st): State<AdminState>,
    Path(id): Path<String>,
) -> Result<Json<AdapterInfo>, PlainError> {
    Ok(Json(st.storage.get_adapter(&id).await?.into()))
}

/// Forgets an adapter (its file stays in the store).
#[utoipa::path(delete, path = "/adapters/{id}", tag = "admin",
    params(("id" = String, Path, description = "The adapter's id")),
    responses((status = 200, body = AdapterInfo), (status = 404, body = PlainErrorBody)))]
async fn delete_one(State(st): State<AdminState>, Path(id): Path<String>) -> Changed<AdapterInfo> {
    let a = st.storage.delete_adapter(&id).await?;
    changed(
        StatusCode::OK,
        json!({"adapter_id": a.id}),
        AdapterInfo::from(a),
    )
}
