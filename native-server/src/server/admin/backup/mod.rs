//! `GET /api/v1/backup` and `POST /api/v1/backup/restore`: the whole storage as a ZIP of
//! JSON-lines tables with a checksummed manifest ([`archive`]), and putting one back.
//!
//! The upload is spooled to a temporary file ([`spool`]) and read from there. A restore
//! checks the archive completely first (names, sizes, ratio, checksums, format,
//! that every row fits the schema), then replaces every table in one transaction, so a bad
//! archive changes nothing. Afterwards this server reloads what it keeps in memory (the
//! settings; keys are read from the database on each request). Other replicas pick up the
//! settings by their poll.

pub mod archive;
mod spool;
mod stream;

use std::collections::BTreeMap;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use self::archive::Refused;
use crate::server::admin::AdminState;
use crate::server::auth::AuditDetails;
use crate::server::auth::RouterState;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use axum::extract::FromRef;

/// Largest upload a restore accepts (the compressed archive), above the server's body limit.
pub const MAX_UPLOAD: usize = 64 << 20;

pub fn routes<S: RouterState>() -> OpenApiRouter<S>
where
    AdminState: FromRef<S>,
{
    let restore = OpenApiRouter::new()
        .routes(routes!(restore))
        .layer(DefaultBodyLimit::max(MAX_UPLOAD));
    OpenApiRouter::new().routes(routes!(backup)).merge(restore)
}

fn refused(r: Refused) -> PlainError {
    let Refused(status, msg) = r;
    let mut e = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(msg),
        _ => ApiError::invalid(msg),
    };
    e.status = status;
    PlainError(e)
}

fn internal(what: &str, e: impl std::fmt::Display) -> PlainError {
    PlainError(ApiError::internal(format!("{what}: {e}")))
}

/// The whole storage as a ZIP download (`weft-backup-<unix time>.zip`).
/// `POST` is the reference peer's method; `GET` stays for links and `curl -O`.
#[utoipa::path(method(get, post), path = "/backup", tag = "admin",
    responses((status = 200, description = "A ZIP: manifest.json, settings.json, tables/<table>.jsonl", content_type = "application/zip", body = Vec<u8>),
              (status = 403, body = PlainErrorBody)))]
async fn backup(State(st): State<AdminState>) -> Result<Response, PlainError> {
    let settings = st.storage.settings().await?;
    let (schema, backend) = (st.storage.schema_version(), st.storage.backend());
    let name = format!("weft-backup-{}.zip", weft_storage::now());
    Ok((
        [
            (header::CONTENT_TYPE, "application/zip".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
        ],
        // A download of every hash is worth an audit row (see auth::policy::audited). The
        // row is written when the response starts, before its size is known.
        Extension(AuditDetails(
            json!({"file": name, "schema_version": schema}),
        )),
        stream::body(st.storage.clone(), settings, schema, backend),
    )
        .into_response())
}

/// What a restore did.
#[derive(Debug, Serialize, ToSchema)]
pub struct Restored {
    /// Rows loaded per table.
    pub tables: BTreeMap<String, usize>,
    /// When the backup was taken (Unix seconds) and by which weft.
    pub backup_created_at: i64,
    pub backup_weft_version: String,
}

/// Replaces all stored state with a backup's, atomically, after checking it completely.
#[utoipa::path(post, path = "/backup/restore", tag = "admin",
    request_body(content_type = "application/zip", content = Vec<u8>, description = "The backup ZIP (or multipart/form-data with the ZIP in field `file`)"),
    responses((status = 200, body = Restored),
              (status = 400, description = "Not a weft backup: not a ZIP, unsafe or unexpected names, symlinks, bad checksums, no manifest", body = PlainErrorBody),
              (status = 413, description = "Too large: the upload, an entry, the total, or a zip bomb's ratio", body = PlainErrorBody),
              (status = 422, description = "A backup that does not fit: unknown format, newer schema, rows of the wrong shape", body = PlainErrorBody)))]
async fn restore(
    State(st): State<AdminState>,
    req: Request,
) -> Result<(StatusCode, Extension<AuditDetails>, Json<Restored>), PlainError> {
    let body = spool::spool(req, MAX_UPLOAD).await?;
    let schema = st.storage.schema_version();
    let checked = tokio::task::spawn_blocking(move || archive::read(&body.file, body.len, schema))
        .await
        .map_err(|e| internal("reading the backup", e))?
        .map_err(refused)?;
    // A backup that does not fit the schema is a 422 (StorageError::Invalid); nothing changed.
    st.storage.load_dump(&checked.tables).await?;
    super::settings::reload(&st).await?;
    let counts: BTreeMap<String, usize> = checked
        .tables
        .iter()
        .map(|(t, r)| (t.clone(), r.len()))
        .collect();
    let m = checked.manifest;
    tracing::info!(created_at = m.created_at, "backup restored");
    let details = json!({"tables": counts, "backup_created_at": m.created_at,
        "backup_weft_version": m.weft_version});
    Ok((
        StatusCode::OK,
        Extension(AuditDetails(details)),
        Json(Restored {
            tables: counts,
            backup_created_at: m.created_at,
            backup_weft_version: m.weft_version,
        }),
    ))
}
