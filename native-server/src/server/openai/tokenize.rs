//! `POST /v1/tokenize` and `POST /v1/detokenize` (llama.cpp server / vLLM style).

use std::sync::Arc;

use axum::extract::State;
use axum::Json;

use super::types::{DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse};
use crate::server::auth::context::RequestCtx;
use crate::server::error::{ApiError, OpenAiError, OpenAiErrorBody};
use crate::server::extract::OpenAiJson;
use crate::server::inference::Inference;

#[utoipa::path(post, path = "/tokenize", tag = "openai", request_body = TokenizeRequest,
    responses((status = 200, body = TokenizeResponse), (status = 400, body = OpenAiErrorBody)))]
pub async fn tokenize(
    State(inference): State<Arc<Inference>>,
    ctx: RequestCtx,
    OpenAiJson(b): OpenAiJson<TokenizeRequest>,
) -> Result<Json<TokenizeResponse>, OpenAiError> {
    let m = inference.lease(&ctx, b.model.as_deref(), None).await?;
    let tokens = m.tokenizer.encode(&b.content, b.add_special, true);
    Ok(Json(TokenizeResponse {
        count: tokens.len(),
        tokens,
        max_model_len: inference.n_ctx,
    }))
}

#[utoipa::path(post, path = "/detokenize", tag = "openai", request_body = DetokenizeRequest,
    responses((status = 200, body = DetokenizeResponse), (status = 400, body = OpenAiErrorBody)))]
pub async fn detokenize(
    State(inference): State<Arc<Inference>>,
    ctx: RequestCtx,
    OpenAiJson(b): OpenAiJson<DetokenizeRequest>,
) -> Result<Json<DetokenizeResponse>, OpenAiError> {
    let m = inference.lease(&ctx, b.model.as_deref(), None).await?;
    let vocab = m.tokenizer.vocab_size();
    let mut ids = Vec::with_capacity(b.tokens.len());
    for &t in &b.tokens {
        if t < 0 || t as usize >= vocab {
            return Err(ApiError::invalid(format!(
                "token {t} is outside the vocabulary of {vocab}"
            ))
            .into());
        }
        ids.push(t as u32);
    }
    let text = m.tokenizer.decode(&ids, true);
    Ok(Json(DetokenizeResponse {
        prompt: text.clone(),
        content: text,
    }))
}
