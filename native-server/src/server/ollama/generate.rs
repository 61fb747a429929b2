//! `POST /api/generate`, and the internal request both Ollama routes build (options, model
//! defaults, operator flags, `format`).

use axum::extract::State;
use serde_json::Value;
use weft_core::chat::Message;

use super::respond::{load_or_unload, respond, Reply, Shape};
use super::types::{think_switch, Frame, GenerateRequest};
use super::Res;
use crate::server::auth::context::RequestCtx;
use crate::server::common::images::Images;
use crate::server::common::options::Options;
use crate::server::common::structured;
use crate::server::common::OneOrMany;
use crate::server::error::{ApiError, PlainErrorBody};
use crate::server::extract::ApiJson;
use crate::server::generate::{self, GenRequest, Reasoning, Think};
use crate::server::leased::Leased;
use crate::server::ollama::OllamaState;

/// The internal request for an Ollama prompt.
pub fn request(
    st: &OllamaState,
    m: &Leased,
    prompt: Vec<u32>,
    opts: Option<Options>,
    format: Option<&Value>,
) -> Result<GenRequest, ApiError> {
    let json = structured::ollama_format(format)?;
    let opts = opts.unwrap_or_default().or(Options::of_model(m));
    if let Some(c) = opts.num_ctx {
        if c <= 0 {
            return Err(ApiError::invalid(format!(
                "num_ctx must be positive, got {c}"
            )));
        }
        // The context is fixed at startup (--ctx); a different per-request value is ignored.
    }
    let sampling = st
        .inference
        .resolve_sampling(&opts.sampling(), Default::default())?;
    // Ollama: num_predict -1 (or -2) means "until the context fills".
    let requested = match opts.num_predict {
        Some(n) if n < 0 => None,
        n => n,
    };
    let max_tokens = st.inference.tokens_to_generate(prompt.len(), requested)?;
    Ok(GenRequest {
        prompt,
        sampling,
        max_tokens,
        stop: opts.stop.map(OneOrMany::into_vec).unwrap_or_default(),
        logprobs: None,
        n: 1,
        ignore_eos: false,
        json,
        media: None,
    })
}

#[utoipa::path(post, path = "/generate", tag = "ollama", request_body = GenerateRequest,
    responses((status = 200, description = "NDJSON frames, or one frame when stream is false",
               content((Frame = "application/x-ndjson"), (Frame = "application/json"))),
              (status = 400, body = PlainErrorBody), (status = 404, body = PlainErrorBody)))]
pub async fn generate(
    State(st): State<OllamaState>,
    ctx: RequestCtx,
    ApiJson(b): ApiJson<GenerateRequest>,
) -> Res {
    structured::ollama_format(b.format.as_ref())?;
    if b.prompt.as_deref().unwrap_or_default().is_empty() {
        return load_or_unload(
            &st,
            &ctx,
            b.model.as_deref(),
            b.keep_alive.as_ref(),
            Shape::Generate,
        )
        .await;
    }
    let mut images = Images::new(&st.inference.images);
    let marks = images.add_list(b.images.as_deref())?;
    if b.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::invalid(
            "suffix (fill-in-the-middle) is not supported by this server",
        )
        .into());
    }
    let m = st
        .inference
        .lease_named(&ctx, b.model.as_deref(), b.keep_alive.as_ref())
        .await?;
    let text = marks + &b.prompt.unwrap_or_default();
    let think = Think::enabled(think_switch(b.think.as_ref())?);
    let prompt = if b.raw || m.template().is_none() {
        if think.enabled == Some(true) {
            return Err(
                ApiError::invalid("think needs the model's chat template: not with raw").into(),
            );
        }
        (generate::text_prompt(&m, &text)?, Reasoning::Absent, text)
    } else {
        let mut messages = Vec::new();
        if let Some(s) = b.system {
            messages.push(Message::system(s));
        }
        messages.push(Message::user(text));
        let constrained = structured::ollama_format(b.format.as_ref())?.is_some();
        let p = generate::constrained_chat_prompt(&m, &messages, None, "", &think, constrained)?;
        (p.ids, p.reasoning, p.text)
    };
    let (prompt, reasoning, rendered) = prompt;
    let n_ctx = st.inference.n_ctx;
    let (prompt, media) = images.attach_text(&m, n_ctx, &rendered, prompt).await?;
    let mut req = request(&st, &m, prompt, b.options, b.format.as_ref())?;
    req.media = media;
    let reply = Reply {
        shape: Shape::Generate,
        tools: None,
        reasoning,
        keep_thinking: think.enabled != Some(false),
    };
    respond(m, req, b.stream.unwrap_or(true), reply).await
}
