//! Ollama's model management: `/api/tags` (every known model), `/api/ps` (the resident ones),
//! `/api/show`, `/api/copy`, `/api/delete` and `/api/create` (a new name from an existing model
//! with its own system prompt, template and parameters).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::body::{ndjson, parse};
use super::error::{ApiError, PlainError};
use super::openai::Options;
use super::state::{rfc3339, Shared};
use crate::registry::{names, Catalog, Facts, Overrides, Resolved};

type Res = Result<Response, PlainError>;

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/api/tags", get(tags))
        .route("/api/ps", get(ps))
        .route("/api/show", post(show))
        .route("/api/copy", post(copy))
        .route("/api/delete", delete(delete_model))
        .route("/api/create", post(create))
}

/// Ollama's `details` object.
pub fn details(f: &Facts) -> Value {
    json!({"parent_model": "", "format": "gguf", "family": f.architecture,
           "families": [f.architecture], "parameter_size": f.parameter_size(),
           "quantization_level": f.quantization})
}

/// One `/api/tags` entry.
fn tag_entry(name: &str, f: &Facts) -> Value {
    let tagged = names::tagged(name);
    json!({"name": tagged, "model": tagged, "modified_at": rfc3339(f.modified),
           "size": f.file_size, "digest": f.digest(), "details": details(f)})
}

/// Every known name; a file that cannot be read is listed with `"broken": reason`.
async fn tags(State(st): State<Shared>) -> Response {
    let models: Vec<Value> = st.registry.with_catalog(|c| {
        c.names()
            .iter()
            .map(|n| match c.resolve(n) {
                Ok(r) => tag_entry(n, &r.facts),
                Err(e) => {
                    let tagged = names::tagged(n);
                    json!({"name": tagged, "model": tagged, "size": 0, "digest": "",
                           "modified_at": rfc3339(std::time::UNIX_EPOCH), "broken": e.message,
                           "details": {"format": "gguf", "family": "", "families": [],
                                       "parameter_size": "", "quantization_level": ""}})
                }
            })
            .collect()
    });
    Json(json!({"models": models})).into_response()
}

/// The resident models, with `expires_at` and their estimated size.
async fn ps(State(st): State<Shared>) -> Response {
    let models: Vec<Value> = st
        .registry
        .resident()
        .iter()
        .map(|r| {
            let mut e = tag_entry(&r.name, &r.facts);
            e["expires_at"] = json!(match r.expires_at {
                Some(t) => rfc3339(t),
                None => "9999-12-31T23:59:59Z".into(),
            });
            e["size"] = json!(r.estimate);
            e["size_vram"] = json!(0);
            e["context_length"] = json!(st.cfg.n_ctx);
            e
        })
        .collect();
    Json(json!({"models": models})).into_response()
}

#[derive(Deserialize)]
struct ShowBody {
    #[serde(alias = "name")]
    model: Option<String>,
}

fn resolve(st: &Shared, model: Option<&str>) -> Result<Resolved, ApiError> {
    let name = model
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("model is required"))?;
    st.registry.with_catalog(|c| c.resolve(name))
}

/// A Modelfile describing a name: its file, system prompt, template and parameters.
pub fn modelfile(r: &Resolved) -> String {
    let mut out = format!("FROM {}\n", r.facts.path.display());
    if let Some(t) = &r.overrides.template {
        out.push_str(&format!("TEMPLATE \"\"\"{t}\"\"\"\n"));
    }
    if let Some(s) = &r.overrides.system {
        out.push_str(&format!("SYSTEM \"\"\"{s}\"\"\"\n"));
    }
    out.push_str(&parameters_text(&r.overrides.parameters));
    out
}

/// `PARAMETER`-style lines (`name value`), one per value (a list gives one line each).
fn parameters_text(p: &Map<String, Value>) -> String {
    let mut out = String::new();
    for (k, v) in p {
        let vals = match v {
            Value::Array(a) => a.clone(),
            v => vec![v.clone()],
        };
        for v in vals {
            let s = match v {
                Value::String(s) => format!("{s:?}"),
                v => v.to_string(),
            };
            out.push_str(&format!("PARAMETER {k} {s}\n"));
        }
    }
    out
}

async fn show(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let b: ShowBody = parse(body)?;
    let r = resolve(&st, b.model.as_deref())?;
    let f = &r.facts;
    let template = r
        .overrides
        .template
        .clone()
        .or_else(|| f.template.clone())
        .unwrap_or_default();
    let mut capabilities = vec!["completion"];
    if template.contains("tools") {
        capabilities.push("tools");
    }
    let arch = &f.architecture;
    let mut info = Map::new();
    info.insert("general.architecture".into(), json!(arch));
    info.insert("general.parameter_count".into(), json!(f.n_params));
    info.insert(format!("{arch}.context_length"), json!(f.context_length));
    info.insert(
        format!("{arch}.embedding_length"),
        json!(f.embedding_length),
    );
    info.insert(format!("{arch}.block_count"), json!(f.block_count));
    info.insert(format!("{arch}.vocab_size"), json!(f.vocab_size));
    let mut params = r.overrides.parameters.clone();
    params
        .entry("num_ctx")
        .or_insert_with(|| json!(st.cfg.n_ctx));
    let mut out = json!({
        "modelfile": modelfile(&r),
        "parameters": parameters_text(&params).replace("PARAMETER ", ""),
        "template": template,
        "details": details(f),
        "model_info": info,
        "capabilities": capabilities,
        "modified_at": rfc3339(f.modified),
    });
    if let Some(s) = &r.overrides.system {
        out["system"] = json!(s);
    }
    Ok(Json(out).into_response())
}

#[derive(Deserialize)]
struct CopyBody {
    source: Option<String>,
    destination: Option<String>,
}

async fn copy(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let b: CopyBody = parse(body)?;
    let (Some(src), Some(dst)) = (b.source, b.destination) else {
        return Err(ApiError::invalid("source and destination are required").into());
    };
    st.registry
        .with_catalog(|c| c.create(&dst, &src, Overrides::default()))?;
    Ok(StatusCode::OK.into_response())
}

#[derive(Deserialize)]
struct DeleteBody {
    #[serde(alias = "name")]
    model: Option<String>,
}

/// Deletes a name. A model in use stays until its requests end.
async fn delete_model(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let b: DeleteBody = parse(body)?;
    let name = b
        .model
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("model is required"))?;
    st.registry.delete(&name)?;
    Ok(StatusCode::OK.into_response())
}

#[derive(Deserialize)]
struct CreateBody {
    #[serde(alias = "name")]
    model: Option<String>,
    from: Option<String>,
    system: Option<String>,
    template: Option<String>,
    parameters: Option<Map<String, Value>>,
    stream: Option<bool>,
    files: Option<Value>,
    adapters: Option<Value>,
    quantize: Option<String>,
    messages: Option<Vec<Value>>,
    #[allow(dead_code)]
    license: Option<Value>,
    modelfile: Option<String>,
}

/// Checks a name's overrides before they are stored: parameters must be valid options and
/// the template must compile.
pub fn check_overrides(o: &Overrides) -> Result<(), ApiError> {
    serde_json::from_value::<Options>(Value::Object(o.parameters.clone()))
        .map_err(|e| ApiError::invalid(format!("parameters: {e}")))?;
    if let Some(t) = &o.template {
        weft_core::chat::ChatTemplate::new(t, "", "")
            .map_err(|e| ApiError::invalid(format!("template: {e}")))?;
    }
    Ok(())
}

/// `/api/create` from an existing model: `{"model", "from", "system", "template",
/// "parameters"}`. Making a model from files, adapters or a quantization is not here yet.
async fn create(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let b: CreateBody = parse(body)?;
    let name = b
        .model
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("model is required"))?;
    let unsupported = [
        ("files", b.files.is_some()),
        ("adapters", b.adapters.is_some()),
        ("quantize", b.quantize.is_some()),
        (
            "messages",
            b.messages.as_ref().is_some_and(|m| !m.is_empty()),
        ),
        ("modelfile", b.modelfile.is_some()),
    ];
    if let Some((field, _)) = unsupported.iter().find(|(_, set)| *set) {
        return Err(ApiError::invalid(format!(
            "/api/create with {field} is not supported; create a model from an existing one \
             with from, system, template and parameters"
        ))
        .into());
    }
    let from = b
        .from
        .filter(|f| !f.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("from is required (the model to start from)"))?;
    let o = Overrides {
        system: b.system,
        template: b.template,
        parameters: b.parameters.unwrap_or_default(),
    };
    check_overrides(&o)?;
    st.registry
        .with_catalog(|c: &mut Catalog| c.create(&name, &from, o))?;
    if b.stream.unwrap_or(true) {
        let frames = ["using existing model", "writing manifest", "success"]
            .map(|s| json!({"status": s}).to_string());
        return Ok(ndjson(futures_util::stream::iter(frames)));
    }
    Ok(Json(json!({"status": "success"})).into_response())
}
