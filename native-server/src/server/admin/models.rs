//! Model management in the peers' shapes: the admin plane's
//! `/api/v1/models/load|unload|library|alias` and `/api/v1/models/{id}/modelfile`, and the chat
//! UI's `POST /api/models/load`. Errors use the `/api` shape (`{"error": "..."}`).

use axum::extract::{Path, State};
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::types::{
    AliasRequest, AliasResponse, Library, LibraryEntry, Loaded, ModelBody, ModelfileRequest,
    ModelfileResponse, Unloaded,
};
use crate::registry::{shown, Origin, Overrides, Target};
use crate::server::admin::AdminState;
use crate::server::auth::context::RequestCtx;
use crate::server::auth::RouterState;
use crate::server::clock::rfc3339;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::extract::ApiJson;
use crate::server::model_names;
use crate::server::ollama::models::{check_overrides, modelfile};
use axum::extract::FromRef;

type Res<T> = Result<Json<T>, PlainError>;

/// Routes relative to `/api/v1`.
pub fn routes<S: RouterState>() -> OpenApiRouter<S>
where
    AdminState: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(load))
        .routes(routes!(unload))
        .routes(routes!(library))
        .routes(routes!(super::library::add))
        .routes(routes!(alias))
        .routes(routes!(get_modelfile, put_modelfile))
}

/// Routes relative to `/api`.
pub fn ui_routes<S: RouterState>() -> OpenApiRouter<S>
where
    AdminState: FromRef<S>,
{
    OpenApiRouter::new().routes(routes!(ui_load))
}

fn required(m: Option<String>) -> Result<String, ApiError> {
    m.filter(|m| !m.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("model is required"))
}

async fn load_model(st: AdminState, ctx: RequestCtx, b: ModelBody) -> Res<Loaded> {
    let t0 = std::time::Instant::now();
    let lease = st
        .inference
        .lease(&ctx, b.model.as_deref(), b.keep_alive.as_ref())
        .await?;
    Ok(Json(Loaded {
        ok: true,
        model: lease.name.clone(),
        loaded: true,
        backend: st.cfg.backend.clone(),
        seconds: t0.elapsed().as_secs_f64(),
    }))
}

/// Loads a model (waiting until it is ready) and keeps it per `keep_alive`.
#[utoipa::path(post, path = "/models/load", tag = "admin", request_body = ModelBody,
    responses((status = 200, body = Loaded), (status = 404, body = PlainErrorBody),
              (status = 503, body = PlainErrorBody)))]
async fn load(
    State(st): State<AdminState>,
    ctx: RequestCtx,
    ApiJson(b): ApiJson<ModelBody>,
) -> Res<Loaded> {
    load_model(st, ctx, b).await
}

/// The chat UI's load (the default model when none is named).
#[utoipa::path(post, path = "/models/load", tag = "chat-ui", request_body = ModelBody,
    responses((status = 200, body = Loaded), (status = 404, body = PlainErrorBody)))]
async fn ui_load(
    State(st): State<AdminState>,
    ctx: RequestCtx,
    ApiJson(b): ApiJson<ModelBody>,
) -> Res<Loaded> {
    load_model(st, ctx, b).await
}

/// Unloads a model now, or when its running requests end.
#[utoipa::path(post, path = "/models/unload", tag = "admin", request_body = ModelBody,
    responses((status = 200, body = Unloaded), (status = 404, body = PlainErrorBody)))]
async fn unload(State(st): State<AdminState>, ApiJson(b): ApiJson<ModelBody>) -> Res<Unloaded> {
    let name = required(b.model)?;
    let was = st.registry.unload(&name)?;
    Ok(Json(Unloaded {
        ok: true,
        model: name,
        was_loaded: was,
    }))
}

/// Every known name: its file, facts, where it came from, whether it is loaded or broken.
#[utoipa::path(get, path = "/models/library", tag = "admin",
    responses((status = 200, body = Library)))]
async fn library(State(st): State<AdminState>) -> Json<Library> {
    let reg = &st.registry;
    let mut models: Vec<LibraryEntry> = reg.with_catalog(|c| {
        c.names()
            .into_iter()
            .map(|n| {
                let e = c.entry(&n).cloned();
                let origin = e.as_ref().map(|e| match e.origin {
                    Origin::CommandLine => "command_line",
                    Origin::Directory => "models_dir",
                    Origin::Created => "created",
                });
                let alias_of = e.as_ref().and_then(|e| match &e.target {
                    Target::Alias(t) => Some(t.clone()),
                    Target::File(_) => None,
                });
                let mut entry = LibraryEntry {
                    name: n.clone(),
                    path: None,
                    size: None,
                    architecture: None,
                    quantization: None,
                    parameter_size: None,
                    context_length: None,
                    modified_at: None,
                    origin,
                    alias_of,
                    broken: None,
                    has_overrides: None,
                    loaded: false,
                };
                match c.resolve(&n) {
                    Ok(r) => {
                        let f = &r.facts;
                        // The file's name, not its absolute path (no path leaves the server).
                        entry.path = Some(shown(&f.path));
                        entry.size = Some(f.file_size);
                        entry.architecture = Some(f.architecture.clone());
                        entry.quantization = Some(f.quantization.clone());
                        entry.parameter_size = Some(f.parameter_size());
                        entry.context_length = Some(f.context_length);
                        entry.modified_at = Some(rfc3339(f.modified));
                        entry.has_overrides = Some(r.overrides != Overrides::default());
                    }
                    Err(err) => entry.broken = Some(err.to_string()),
                }
                entry
            })
            .collect()
    });
    for m in &mut models {
        m.loaded = reg.is_loaded(&m.name);
    }
    Json(Library { models })
}

#[utoipa::path(post, path = "/models/alias", tag = "admin", request_body = AliasRequest,
    responses((status = 200, body = AliasResponse), (status = 400, body = PlainErrorBody),
              (status = 404, body = PlainErrorBody)))]
async fn alias(
    State(st): State<AdminState>,
    ApiJson(b): ApiJson<AliasRequest>,
) -> Res<AliasResponse> {
    let (Some(a), Some(m)) = (b.alias, b.model) else {
        return Err(ApiError::invalid("alias and model are required").into());
    };
    let a =
        model_names::change(&st.names, || st.registry.with_catalog(|c| c.alias(&a, &m))).await?;
    Ok(Json(AliasResponse {
        ok: true,
        alias: a,
        model: m,
    }))
}

fn modelfile_of(st: &AdminState, id: &str) -> Result<ModelfileResponse, ApiError> {
    let r = st.registry.with_catalog(|c| c.resolve(id))?;
    Ok(ModelfileResponse {
        model: r.name.clone(),
        modelfile: modelfile(&r),
        system: r.overrides.system.clone(),
        template: r.overrides.template.clone(),
        parameters: r.overrides.parameters.clone(),
    })
}

#[utoipa::path(get, path = "/models/{id}/modelfile", tag = "admin",
    params(("id" = String, Path, description = "A model name")),
    responses((status = 200, body = ModelfileResponse), (status = 404, body = PlainErrorBody)))]
async fn get_modelfile(
    State(st): State<AdminState>,
    Path(id): Path<String>,
) -> Res<ModelfileResponse> {
    Ok(Json(modelfile_of(&st, &id)?))
}

/// Replaces a name's own system prompt, template and parameters.
#[utoipa::path(put, path = "/models/{id}/modelfile", tag = "admin",
    params(("id" = String, Path, description = "A model name")), request_body = ModelfileRequest,
    responses((status = 200, body = ModelfileResponse), (status = 400, body = PlainErrorBody),
              (status = 404, body = PlainErrorBody)))]
async fn put_modelfile(
    State(st): State<AdminState>,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<ModelfileRequest>,
) -> Res<ModelfileResponse> {
    let o = Overrides {
        system: b.system,
        template: b.template,
        parameters: b.parameters.unwrap_or_default(),
    };
    check_overrides(&o)?;
    let name = model_names::change(&st.names, || {
        st.registry.with_catalog(|c| c.set_overrides(&id, o))
    })
    .await?;
    Ok(Json(modelfile_of(&st, &name)?))
}
