//! The skills registry over HTTP: `GET/POST /api/skills`, `GET/DELETE /api/skills/{id}` (the
//! chat UI's shape, with load errors, upload and delete) and the read-only OpenAI-flavoured
//! `GET /v1/skills[/{id}]`. The registry rescans its folders on each call, so the handlers
//! run it on the blocking pool.

mod types;

use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Path, State};
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use weft_sandbox::SkillRegistry;

use super::error::{ApiError, OpenAiError, OpenAiErrorBody, PlainError, PlainErrorBody};
use crate::server::auth::RouterState;
use crate::server::code::CodeState;
use axum::extract::FromRef;
pub use types::*;

/// Routes relative to `/api`.
pub fn ui_routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    CodeState: FromRef<S>,
{
    use crate::server::auth::Routes;
    let reads = OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(one));
    let changes = OpenApiRouter::new()
        .routes(routes!(install))
        .routes(routes!(remove));
    Routes::read(reads).merge(Routes::admin(changes))
}

/// Routes relative to `/v1`.
pub fn openai_routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    CodeState: FromRef<S>,
{
    crate::server::auth::Routes::read(
        OpenApiRouter::new()
            .routes(routes!(openai_list))
            .routes(routes!(openai_one)),
    )
}

/// Runs `f` on the registry off the async workers.
async fn blocking<T: Send + 'static>(
    st: &CodeState,
    f: impl FnOnce(&SkillRegistry) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let reg = st.code.skills.clone();
    tokio::task::spawn_blocking(move || f(&reg))
        .await
        .map_err(|e| ApiError::internal(format!("skills task: {e}")))?
}

fn listing(reg: &SkillRegistry) -> SkillsListing {
    let l = reg.list();
    SkillsListing {
        enabled: true,
        installable: reg.installable(),
        skills: l
            .skills
            .into_iter()
            .map(|s| SkillObject::new(s, false))
            .collect(),
        errors: l.errors.into_iter().map(Into::into).collect(),
    }
}

fn get_one(reg: &SkillRegistry, id: &str) -> Result<SkillObject, ApiError> {
    Ok(SkillObject::new(reg.get(id)?, true))
}

#[utoipa::path(get, path = "/skills", tag = "chat-ui",
    responses((status = 200, body = SkillsListing)))]
async fn list(State(st): State<CodeState>) -> Result<Json<SkillsListing>, PlainError> {
    Ok(Json(blocking(&st, |r| Ok(listing(r))).await?))
}

#[utoipa::path(get, path = "/skills/{id}", tag = "chat-ui",
    params(("id" = String, Path, description = "The skill's id (its folder name)")),
    responses((status = 200, body = SkillObject), (status = 404, body = PlainErrorBody)))]
async fn one(
    State(st): State<CodeState>,
    Path(id): Path<String>,
) -> Result<Json<SkillObject>, PlainError> {
    Ok(Json(blocking(&st, move |r| get_one(r, &id)).await?))
}

/// Installs a zip; every entry is checked before anything is written.
#[utoipa::path(post, path = "/skills", tag = "chat-ui",
    request_body(content = SkillUpload, content_type = "multipart/form-data"),
    responses((status = 200, body = SkillObject, description = "The installed skill"),
              (status = 400, body = PlainErrorBody, description = "The archive was refused"),
              (status = 409, body = PlainErrorBody, description = "Already installed"),
              (status = 413, body = PlainErrorBody)))]
async fn install(
    State(st): State<CodeState>,
    form: Result<Multipart, MultipartRejection>,
) -> Result<Json<SkillObject>, PlainError> {
    let mut form = form.map_err(|e| {
        ApiError::invalid(format!(
            "send the skill as multipart/form-data with a `file` field: {}",
            e.body_text()
        ))
    })?;
    let mut zip = None;
    let mut overwrite = false;
    loop {
        let field = form.next_field().await.map_err(form_error)?;
        let Some(field) = field else { break };
        match field.name() {
            Some("file") => zip = Some(spool(field).await?),
            Some("overwrite") => {
                let v = field.text().await.map_err(form_error)?;
                overwrite = match v.trim().to_ascii_lowercase().as_str() {
                    "true" | "1" | "on" | "yes" => true,
                    "false" | "0" | "off" | "no" | "" => false,
                    other => {
                        return Err(ApiError::invalid(format!(
                            "overwrite must be true or false, got {other:?}"
                        ))
                        .into())
                    }
                };
            }
            _ => {}
        }
    }
    let zip = zip.ok_or_else(|| ApiError::invalid("the form has no `file` field (the zip)"))?;
    let skill = blocking(&st, move |r| {
        Ok(SkillObject::new(r.install_zip_file(zip, overwrite)?, false))
    })
    .await?;
    tracing::info!(skill = %skill.id, "skill installed");
    Ok(Json(skill))
}

/// Writes the uploaded zip to an unnamed temporary file as it arrives (the body limit bounds
/// it), so installing reads it from disk rather than memory.
async fn spool(mut field: axum::extract::multipart::Field<'_>) -> Result<std::fs::File, ApiError> {
    use tokio::io::AsyncWriteExt;
    let spool_error =
        |e: std::io::Error| ApiError::internal(format!("spooling the skill archive: {e}"));
    let file = tempfile::tempfile().map_err(spool_error)?;
    let mut out = tokio::fs::File::from_std(file);
    while let Some(chunk) = field.chunk().await.map_err(form_error)? {
        out.write_all(&chunk).await.map_err(spool_error)?;
    }
    out.flush().await.map_err(spool_error)?;
    Ok(out.into_std().await)
}

fn form_error(e: axum::extract::multipart::MultipartError) -> ApiError {
    let status = e.status();
    let msg = format!("reading the form: {}", e.body_text());
    if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large(format!("{msg} (the server's --body-limit)"))
    } else {
        ApiError::invalid(msg)
    }
}

/// Removes an installed skill (discovered ones are read-only: 400).
#[utoipa::path(delete, path = "/skills/{id}", tag = "chat-ui",
    params(("id" = String, Path, description = "The skill's id")),
    responses((status = 200, body = Removed), (status = 400, body = PlainErrorBody),
              (status = 404, body = PlainErrorBody)))]
async fn remove(
    State(st): State<CodeState>,
    Path(id): Path<String>,
) -> Result<Json<Removed>, PlainError> {
    blocking(&st, move |r| Ok(r.delete(&id)?)).await?;
    Ok(Json(Removed { removed: true }))
}

#[utoipa::path(get, path = "/skills", tag = "openai",
    responses((status = 200, body = SkillList)))]
async fn openai_list(State(st): State<CodeState>) -> Result<Json<SkillList>, OpenAiError> {
    let l = blocking(&st, |r| Ok(listing(r))).await?;
    Ok(Json(SkillList {
        object: "list",
        data: l.skills,
    }))
}

#[utoipa::path(get, path = "/skills/{id}", tag = "openai",
    params(("id" = String, Path, description = "The skill's id")),
    responses((status = 200, body = SkillObject), (status = 404, body = OpenAiErrorBody)))]
async fn openai_one(
    State(st): State<CodeState>,
    Path(id): Path<String>,
) -> Result<Json<SkillObject>, OpenAiError> {
    Ok(Json(blocking(&st, move |r| get_one(r, &id)).await?))
}
