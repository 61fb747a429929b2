//! `POST /api/v1/models/library`: adds a library entry (the peer's "add library entry"): a
//! name for a GGUF file that is already on the server's disk, inside the models folder or an
//! `--import-root`, used where it lies (no copy; `POST /api/v1/models/import` copies). The
//! name is saved like a created name (in the database, so every replica and a restart see
//! it), listed by `GET /api/v1/models/library` with origin `created`, and deleted with
//! `/api/delete`, which never deletes a file outside the models folder.
//!
//! No answer carries a file-system path: the request's path is the caller's own, and the
//! server's folders are not named back.

use std::path::{Path, PathBuf};

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::server::admin::AdminState;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::extract::ApiJson;
use crate::server::model_names;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddEntry {
    /// The new model name.
    pub name: String,
    /// A GGUF file: relative to the models folder, or absolute inside it or an import root.
    pub path: String,
}

/// The entry as added: the name and its file's header facts.
#[derive(Debug, Serialize, ToSchema)]
pub struct Added {
    pub name: String,
    /// `created`.
    pub origin: &'static str,
    pub size: u64,
    pub architecture: String,
    pub quantization: String,
    pub parameter_size: String,
    pub context_length: u64,
}

/// The file `given` names, symlinks resolved, if it lies inside one of `roots` (the first
/// is the models folder, where a relative path starts).
fn locate(given: &str, roots: &[PathBuf]) -> Result<PathBuf, ApiError> {
    let given = given.trim();
    if given.is_empty() {
        return Err(ApiError::invalid("path is required"));
    }
    let p = Path::new(given);
    let p = match roots.first() {
        Some(dir) if p.is_relative() => dir.join(p),
        _ => p.to_path_buf(),
    };
    let outside = || {
        ApiError::invalid(
            "path must be a file inside the models folder or an import root (--import-root)",
        )
    };
    let real = p
        .canonicalize()
        .map_err(|_| ApiError::invalid("path does not name a readable file on the server"))?;
    if !roots.iter().any(|r| real.starts_with(r)) {
        return Err(outside());
    }
    if !real.is_file() || real.extension().is_none_or(|x| x != "gguf") {
        return Err(ApiError::invalid("path must be a .gguf model file"));
    }
    Ok(real)
}

/// Adds a name for a GGUF file already on the server (see the module comment).
#[utoipa::path(post, path = "/models/library", tag = "admin", request_body = AddEntry,
    responses((status = 201, body = Added), (status = 400, body = PlainErrorBody),
              (status = 409, body = PlainErrorBody), (status = 503, body = PlainErrorBody)))]
pub async fn add(
    State(st): State<AdminState>,
    ApiJson(b): ApiJson<AddEntry>,
) -> Result<(StatusCode, Json<Added>), PlainError> {
    let roots = st.jobs()?.store.import_roots.clone();
    let real = locate(&b.path, &roots)?;
    let given = b.path.trim().to_string();
    let name = model_names::change(&st.names, || {
        st.registry
            .with_catalog(|c| c.add_library_entry(&b.name, &real))
            .map_err(|e| {
                // A header error names the file: say "the file" instead.
                let e = ApiError::from(e);
                let msg = e
                    .message
                    .replace(&real.display().to_string(), "the file")
                    .replace(&given, "the file");
                ApiError { message: msg, ..e }
            })
    })
    .await?;
    let r = st.registry.with_catalog(|c| c.resolve(&name))?;
    let f = &r.facts;
    Ok((
        StatusCode::CREATED,
        Json(Added {
            name,
            origin: "created",
            size: f.file_size,
            architecture: f.architecture.clone(),
            quantization: f.quantization.clone(),
            parameter_size: f.parameter_size(),
            context_length: f.context_length,
        }),
    ))
}
