//! Ollama's model management: `/api/tags` (every known model), `/api/ps` (the resident ones),
//! `/api/show`, `/api/copy`, `/api/delete` and `/api/create` (a new name from an existing model
//! with its own system prompt, template and parameters).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{Map, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::types::{
    CopyRequest, CreateRequest, Details, ModelRef, PsEntry, PsResponse, ShowResponse, Status,
    TagEntry, TagsResponse,
};
use super::Res;
use crate::registry::{names, shown, Facts, Overrides, Resolved, Scope};
use crate::server::auth::caller::Caller;
use crate::server::auth::RouterState;
use crate::server::clock::rfc3339;
use crate::server::common::options::Options;
use crate::server::error::PlainError;
use crate::server::error::{ApiError, PlainErrorBody};
use crate::server::extract::ApiJson;
use crate::server::inference::admission;
use crate::server::model_names;
use crate::server::ollama::OllamaState;
use crate::server::stream::{json_frame, ndjson};
use axum::extract::FromRef;

/// Routes relative to `/api`.
pub fn routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    OllamaState: FromRef<S>,
{
    use crate::server::auth::Routes;
    let reads = OpenApiRouter::new()
        .routes(routes!(tags))
        .routes(routes!(ps));
    // `show` is a POST (Ollama's shape), so it needs what inference needs.
    let show = OpenApiRouter::new().routes(routes!(show));
    let store_changes = OpenApiRouter::new()
        .routes(routes!(copy))
        .routes(routes!(delete_model))
        .routes(routes!(create));
    Routes::read(reads)
        .merge(Routes::user(show))
        .merge(Routes::admin(store_changes))
}

/// One `/api/tags` entry.
fn tag_entry(name: &str, f: &Facts) -> TagEntry {
    let tagged = names::tagged(name);
    TagEntry {
        name: tagged.clone(),
        model: tagged,
        modified_at: rfc3339(f.modified),
        size: f.file_size,
        digest: f.digest(),
        details: Details::of(f),
        broken: None,
    }
}

/// Every known name; a file that cannot be read is listed with `"broken": reason`.
#[utoipa::path(get, path = "/tags", tag = "ollama", responses((status = 200, body = TagsResponse)))]
async fn tags(
    State(st): State<OllamaState>,
    caller: Caller,
) -> Result<Json<TagsResponse>, PlainError> {
    // A key in a tenant sees only the tenant's allowed models.
    let scope = admission::scope(&st.inference, &caller).await?;
    let models = st.registry.with_catalog(|c| {
        c.names_in(&scope)
            .iter()
            .map(|n| match c.resolve(n) {
                Ok(r) => tag_entry(n, &r.facts),
                Err(e) => {
                    let tagged = names::tagged(n);
                    TagEntry {
                        name: tagged.clone(),
                        model: tagged,
                        modified_at: rfc3339(std::time::UNIX_EPOCH),
                        size: 0,
                        digest: String::new(),
                        details: Details::unknown(),
                        broken: Some(e.to_string()),
                    }
                }
            })
            .collect()
    });
    Ok(Json(TagsResponse { models }))
}

/// The resident models, with `expires_at` and their estimated size.
#[utoipa::path(get, path = "/ps", tag = "ollama", responses((status = 200, body = PsResponse)))]
async fn ps(State(st): State<OllamaState>, caller: Caller) -> Result<Json<PsResponse>, PlainError> {
    let scope = admission::scope(&st.inference, &caller).await?;
    let models = st
        .registry
        .resident()
        .iter()
        .filter(|r| scope.allows(&r.name))
        .map(|r| {
            let mut tag = tag_entry(&r.name, &r.facts);
            tag.size = r.estimate;
            PsEntry {
                tag,
                expires_at: match r.expires_at {
                    Some(t) => rfc3339(t),
                    None => "9999-12-31T23:59:59Z".into(),
                },
                size_vram: 0,
                context_length: st.cfg.n_ctx,
            }
        })
        .collect();
    Ok(Json(PsResponse { models }))
}

fn resolve(st: &OllamaState, scope: &Scope, model: Option<&str>) -> Result<Resolved, ApiError> {
    let name = model
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("model is required"))?;
    Ok(st.registry.with_catalog(|c| c.resolve_in(name, scope))?)
}

/// A Modelfile describing a name: its file (by file name: no absolute path leaves the
/// server), system prompt, template and parameters.
pub fn modelfile(r: &Resolved) -> String {
    let mut out = format!("FROM {}\n", shown(&r.facts.path));
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

#[utoipa::path(post, path = "/show", tag = "ollama", request_body = ModelRef,
    responses((status = 200, body = ShowResponse), (status = 404, body = PlainErrorBody)))]
async fn show(
    State(st): State<OllamaState>,
    caller: Caller,
    ApiJson(b): ApiJson<ModelRef>,
) -> Result<Json<ShowResponse>, crate::server::error::PlainError> {
    let scope = admission::scope(&st.inference, &caller).await?;
    let r = resolve(&st, &scope, b.model.as_deref())?;
    let f = &r.facts;
    let caps = f.capabilities_with(r.overrides.template.as_deref());
    let template = r
        .overrides
        .template
        .clone()
        .or_else(|| f.template.clone())
        .unwrap_or_default();
    // Ollama's names; "embedding" alone for an encoder, as Ollama reports embedding models.
    let capabilities: Vec<&str> = [
        (caps.completion, "completion"),
        (caps.tools, "tools"),
        (caps.thinking, "thinking"),
        (caps.completion && f.mmproj.is_some(), "vision"),
        (caps.embedding && !caps.completion, "embedding"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    let arch = &f.architecture;
    let mut info = Map::new();
    info.insert("general.architecture".into(), Value::from(arch.as_str()));
    info.insert("general.parameter_count".into(), Value::from(f.n_params));
    info.insert(
        format!("{arch}.context_length"),
        Value::from(f.context_length),
    );
    info.insert(
        format!("{arch}.embedding_length"),
        Value::from(f.embedding_length),
    );
    info.insert(format!("{arch}.block_count"), Value::from(f.block_count));
    info.insert(format!("{arch}.vocab_size"), Value::from(f.vocab_size));
    let mut params = r.overrides.parameters.clone();
    params
        .entry("num_ctx")
        .or_insert_with(|| Value::from(st.cfg.n_ctx));
    Ok(Json(ShowResponse {
        modelfile: modelfile(&r),
        parameters: parameters_text(&params).replace("PARAMETER ", ""),
        template,
        details: Details::of(f),
        model_info: info,
        capabilities,
        modified_at: rfc3339(f.modified),
        system: r.overrides.system.clone(),
    }))
}

#[utoipa::path(post, path = "/copy", tag = "ollama", request_body = CopyRequest,
    responses((status = 200), (status = 404, body = PlainErrorBody)))]
async fn copy(State(st): State<OllamaState>, ApiJson(b): ApiJson<CopyRequest>) -> Res {
    let (Some(src), Some(dst)) = (b.source, b.destination) else {
        return Err(ApiError::invalid("source and destination are required").into());
    };
    model_names::change(&st.names, || {
        st.registry
            .with_catalog(|c| c.create(&dst, &src, Overrides::default()))
    })
    .await?;
    Ok(StatusCode::OK.into_response())
}

/// Deletes a name. A model in use stays until its requests end.
#[utoipa::path(delete, path = "/delete", tag = "ollama", request_body = ModelRef,
    responses((status = 200), (status = 404, body = PlainErrorBody)))]
async fn delete_model(State(st): State<OllamaState>, ApiJson(b): ApiJson<ModelRef>) -> Res {
    let name = b
        .model
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("model is required"))?;
    model_names::change(&st.names, || st.registry.delete(&name)).await?;
    Ok(StatusCode::OK.into_response())
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
/// "parameters"}`; or from a Hugging Face folder uploaded as blobs: `{"model", "files",
/// "quantize"?}` (`server/jobs/ollama_create.rs`). Adapters are not here yet.
#[utoipa::path(post, path = "/create", tag = "ollama", request_body = CreateRequest,
    responses((status = 200, description = "Status lines (NDJSON), or one when stream is false",
               content((Status = "application/x-ndjson"), (Status = "application/json"))),
              (status = 400, body = PlainErrorBody), (status = 404, body = PlainErrorBody)))]
async fn create(
    State(st): State<OllamaState>,
    caller: Caller,
    ApiJson(b): ApiJson<CreateRequest>,
) -> Res {
    let name = b
        .model
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("model is required"))?;
    if b.files.is_some() && b.from.is_none() {
        let owner = caller.owner();
        return crate::server::jobs::create_from_files(
            &st.jobs, owner, name, b.files, b.quantize, b.stream,
        )
        .await;
    }
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
    model_names::change(&st.names, || {
        st.registry.with_catalog(|c| c.create(&name, &from, o))
    })
    .await?;
    if b.stream.unwrap_or(true) {
        let frames = ["using existing model", "writing manifest", "success"]
            .map(|status| json_frame(&Status { status }));
        return Ok(ndjson(futures_util::stream::iter(frames)));
    }
    Ok(Json(Status { status: "success" }).into_response())
}
