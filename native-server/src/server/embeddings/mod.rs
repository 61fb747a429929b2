//! The embedding routes: OpenAI `POST /v1/embeddings`, Ollama `POST /api/embed` and the legacy
//! `POST /api/embeddings`. Every served model embeds: an embedding model (BERT family) as its
//! config says, a chat model with the last token's hidden state (as Ollama). Requests run on
//! the model's embedding worker (`registry::EmbedWorker`), beside its chat scheduler.

mod input;
mod types;

use std::time::Instant;

use axum::extract::State;
use axum::Json;
use base64::Engine as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use weft_core::embed::{EmbedError, EmbedInput, EmbedOptions, Embeddings};

use super::error::{ApiError, OpenAiError, OpenAiErrorBody, PlainError, PlainErrorBody};
use super::extract::{ApiJson, OpenAiJson};
use super::inference::Inference;
use crate::registry::WorkerError;
use crate::server::auth::context::RequestCtx;
use crate::server::auth::RouterState;
use axum::extract::FromRef;
use std::sync::Arc;
use types::*;

/// `/v1/embeddings`, relative to `/v1`.
pub fn openai_routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    Arc<Inference>: FromRef<S>,
{
    crate::server::auth::Routes::user(OpenApiRouter::new().routes(routes!(openai)))
}

/// `/api/embed` and `/api/embeddings`, relative to `/api`.
pub fn ollama_routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    Arc<Inference>: FromRef<S>,
{
    crate::server::auth::Routes::user(
        OpenApiRouter::new()
            .routes(routes!(ollama_embed))
            .routes(routes!(ollama_legacy)),
    )
}

/// Leases the model and embeds; returns the vectors, the model's name and the nanoseconds the
/// lease took (loading, when the model was not resident).
async fn run(
    inference: &Inference,
    ctx: &RequestCtx,
    model: Option<&str>,
    keep_alive: Option<&serde_json::Value>,
    inputs: Vec<EmbedInput>,
    opts: EmbedOptions,
) -> Result<(Embeddings, String, u64), ApiError> {
    let t = Instant::now();
    let lease = inference.lease_named(ctx, model, keep_alive).await?;
    let load_ns = t.elapsed().as_nanos() as u64;
    let out = lease.embed.embed(inputs, opts).await.map_err(|e| match e {
        WorkerError::Input(e @ EmbedError::TooLong { .. }) => {
            ApiError::invalid_code("context_length_exceeded", e.to_string())
        }
        WorkerError::Input(e) => ApiError::invalid(e.to_string()),
        WorkerError::Model(m) => ApiError::internal(m),
    })?;
    Ok((out, lease.name.clone(), load_ns))
}

#[utoipa::path(post, path = "/embeddings", tag = "openai", request_body = OpenAiRequest,
    responses((status = 200, body = OpenAiResponse), (status = 400, body = OpenAiErrorBody),
              (status = 404, body = OpenAiErrorBody)))]
async fn openai(
    State(inference): State<Arc<Inference>>,
    ctx: RequestCtx,
    OpenAiJson(req): OpenAiJson<OpenAiRequest>,
) -> Result<Json<OpenAiResponse>, OpenAiError> {
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "encoding_format must be \"float\" or \"base64\", got {other:?}"
            ))
            .into())
        }
    };
    let inputs = input::openai(req.input.as_ref())?;
    let opts = EmbedOptions {
        normalize: None,
        dimensions: input::dimensions(req.dimensions)?,
        // OpenAI refuses inputs longer than the model takes.
        truncate: false,
    };
    let (out, name, _) = run(&inference, &ctx, req.model.as_deref(), None, inputs, opts).await?;
    let data = out
        .vectors
        .into_iter()
        .enumerate()
        .map(|(index, v)| OpenAiItem {
            object: "embedding",
            index,
            embedding: if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                Vector::Base64(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                Vector::Float(v)
            },
        })
        .collect();
    Ok(Json(OpenAiResponse {
        object: "list",
        data,
        model: name,
        usage: OpenAiUsage {
            prompt_tokens: out.prompt_tokens,
            total_tokens: out.prompt_tokens,
        },
    }))
}

#[utoipa::path(post, path = "/embed", tag = "ollama", request_body = EmbedRequest,
    responses((status = 200, body = EmbedResponse), (status = 400, body = PlainErrorBody),
              (status = 404, body = PlainErrorBody)))]
async fn ollama_embed(
    State(inference): State<Arc<Inference>>,
    ctx: RequestCtx,
    ApiJson(req): ApiJson<EmbedRequest>,
) -> Result<Json<EmbedResponse>, PlainError> {
    let t = Instant::now();
    let inputs = input::ollama(req.input.as_ref())?;
    let opts = EmbedOptions {
        // Ollama's /api/embed returns unit vectors.
        normalize: Some(true),
        dimensions: input::dimensions(req.dimensions)?,
        truncate: req.truncate.unwrap_or(true),
    };
    let model = req.model.as_deref();
    let (out, name, load_ns) = run(
        &inference,
        &ctx,
        model,
        req.keep_alive.as_ref(),
        inputs,
        opts,
    )
    .await?;
    Ok(Json(EmbedResponse {
        model: name,
        embeddings: out.vectors,
        total_duration: t.elapsed().as_nanos() as u64,
        load_duration: load_ns,
        prompt_eval_count: out.prompt_tokens,
    }))
}

#[utoipa::path(post, path = "/embeddings", tag = "ollama", request_body = LegacyRequest,
    responses((status = 200, body = LegacyResponse), (status = 400, body = PlainErrorBody),
              (status = 404, body = PlainErrorBody)))]
async fn ollama_legacy(
    State(inference): State<Arc<Inference>>,
    ctx: RequestCtx,
    ApiJson(req): ApiJson<LegacyRequest>,
) -> Result<Json<LegacyResponse>, PlainError> {
    let prompt = req
        .prompt
        .ok_or_else(|| ApiError::invalid("prompt is required"))?;
    let opts = EmbedOptions {
        // As Ollama's legacy route: the pooled vector, not normalised.
        normalize: Some(false),
        dimensions: None,
        truncate: true,
    };
    let inputs = vec![EmbedInput::Text(prompt)];
    let model = req.model.as_deref();
    let (mut out, _, _) = run(
        &inference,
        &ctx,
        model,
        req.keep_alive.as_ref(),
        inputs,
        opts,
    )
    .await?;
    Ok(Json(LegacyResponse {
        embedding: out.vectors.pop().unwrap_or_default(),
    }))
}
