//! Model management in the peers' shapes: the chat UI's `POST /api/models/load`, and the
//! admin plane's `/api/v1/models/load|unload|library|alias` and `/api/v1/models/{id}/modelfile`.
//! Errors use the `/api` shape (`{"error": "..."}`).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::body::parse;
use super::error::{ApiError, PlainError};
use super::ollama_models::{check_overrides, modelfile};
use super::state::{rfc3339, Shared};
use crate::registry::{Origin, Overrides, Target};

type Res = Result<Response, PlainError>;

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/api/models/load", post(load))
        .route("/api/v1/models/load", post(load))
        .route("/api/v1/models/unload", post(unload))
        .route("/api/v1/models/library", get(library))
        .route("/api/v1/models/alias", post(alias))
        .route(
            "/api/v1/models/{id}/modelfile",
            get(get_modelfile).put(put_modelfile),
        )
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelBody {
    #[serde(alias = "name", alias = "modelName")]
    model: Option<String>,
    keep_alive: Option<Value>,
}

fn required(m: Option<String>) -> Result<String, ApiError> {
    m.filter(|m| !m.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("model is required"))
}

/// Loads a model (waiting until it is ready) and keeps it per `keep_alive`.
async fn load(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let b: ModelBody = parse(body)?;
    let t0 = std::time::Instant::now();
    let lease = st.lease(b.model.as_deref(), b.keep_alive.as_ref()).await?;
    Ok(Json(json!({"ok": true, "model": lease.name, "loaded": true,
                   "backend": st.cfg.backend,
                   "seconds": t0.elapsed().as_secs_f64()}))
    .into_response())
}

/// Unloads a model now, or when its running requests end.
async fn unload(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let b: ModelBody = parse(body)?;
    let name = required(b.model)?;
    let was = st.registry.unload(&name)?;
    Ok(Json(json!({"ok": true, "model": name, "wasLoaded": was})).into_response())
}

/// Every known name: its file, facts, where it came from, whether it is loaded or broken.
async fn library(State(st): State<Shared>) -> Response {
    let reg = &st.registry;
    let rows: Vec<(String, Value)> = reg.with_catalog(|c| {
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
                let v = match c.resolve(&n) {
                    Ok(r) => {
                        let f = &r.facts;
                        json!({"name": n, "path": f.path, "size": f.file_size,
                               "architecture": f.architecture, "quantization": f.quantization,
                               "parameterSize": f.parameter_size(),
                               "contextLength": f.context_length,
                               "modifiedAt": rfc3339(f.modified), "origin": origin,
                               "aliasOf": alias_of, "broken": null,
                               "hasOverrides": r.overrides != Overrides::default()})
                    }
                    Err(err) => json!({"name": n, "origin": origin, "aliasOf": alias_of,
                                       "broken": err.message}),
                };
                (n, v)
            })
            .collect()
    });
    let models: Vec<Value> = rows
        .into_iter()
        .map(|(n, mut v)| {
            v["loaded"] = json!(reg.is_loaded(&n));
            v
        })
        .collect();
    Json(json!({"models": models})).into_response()
}

#[derive(Deserialize)]
struct AliasBody {
    alias: Option<String>,
    #[serde(alias = "target")]
    model: Option<String>,
}

async fn alias(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let b: AliasBody = parse(body)?;
    let (Some(a), Some(m)) = (b.alias, b.model) else {
        return Err(ApiError::invalid("alias and model are required").into());
    };
    let a = st.registry.with_catalog(|c| c.alias(&a, &m))?;
    Ok(Json(json!({"ok": true, "alias": a, "model": m})).into_response())
}

fn modelfile_json(st: &Shared, id: &str) -> Result<Value, ApiError> {
    let r = st.registry.with_catalog(|c| c.resolve(id))?;
    Ok(
        json!({"model": r.name, "modelfile": modelfile(&r), "system": r.overrides.system,
              "template": r.overrides.template, "parameters": r.overrides.parameters}),
    )
}

async fn get_modelfile(State(st): State<Shared>, Path(id): Path<String>) -> Res {
    Ok(Json(modelfile_json(&st, &id)?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelfileBody {
    system: Option<String>,
    template: Option<String>,
    parameters: Option<Map<String, Value>>,
}

/// Replaces a name's own system prompt, template and parameters.
async fn put_modelfile(
    State(st): State<Shared>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Res {
    let b: ModelfileBody = parse(body)?;
    let o = Overrides {
        system: b.system,
        template: b.template,
        parameters: b.parameters.unwrap_or_default(),
    };
    check_overrides(&o)?;
    let name = st.registry.with_catalog(|c| c.set_overrides(&id, o))?;
    Ok(Json(modelfile_json(&st, &name)?).into_response())
}
