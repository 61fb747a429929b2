//! Ollama chat: `POST /api/chat` with an Ollama body (see `server/api.rs`) and
//! `POST /api/chat/ollama`.

use axum::extract::State;
use weft_core::chat::Message;

use super::respond::{load_or_unload, respond, Reply, Shape};
use super::tool_loop::LoopRequest;
use super::types::{think_switch, ChatRequest, Frame};
use super::Res;
use crate::server::auth::caller::Caller;
use crate::server::auth::context::RequestCtx;
use crate::server::code::agent::ClientTools;
use crate::server::code::plan::{self, Scope};
use crate::server::common::images::Images;
use crate::server::common::{structured, tools};
use crate::server::error::{ApiError, PlainErrorBody};
use crate::server::extract::ApiJson;
use crate::server::generate::{self, Think};
use crate::server::ollama::OllamaState;

#[utoipa::path(post, path = "/chat/ollama", tag = "ollama", request_body = ChatRequest,
    responses((status = 200, description = "NDJSON frames, or one frame when stream is false",
               content((Frame = "application/x-ndjson"), (Frame = "application/json"))),
              (status = 400, body = PlainErrorBody), (status = 404, body = PlainErrorBody)))]
pub async fn chat_alias(
    State(st): State<OllamaState>,
    ctx: RequestCtx,
    caller: Caller,
    ApiJson(b): ApiJson<ChatRequest>,
) -> Res {
    chat(st, ctx, caller, b).await
}

/// The Ollama chat of `caller` (the owner of the files its built-in calls write).
pub async fn chat(st: OllamaState, ctx: RequestCtx, caller: Caller, b: ChatRequest) -> Res {
    if b.messages.as_ref().is_some_and(Vec::is_empty) {
        // Ollama answers an empty conversation by loading (or, keep_alive 0, unloading).
        return load_or_unload(
            &st,
            &ctx,
            b.model.as_deref(),
            b.keep_alive.as_ref(),
            Shape::Chat,
        )
        .await;
    }
    let think = think_switch(b.think.as_ref())?;
    let m = st
        .inference
        .lease_named(&ctx, b.model.as_deref(), b.keep_alive.as_ref())
        .await?;
    let tools = match b.tools.as_ref().filter(|t| !t.is_empty()) {
        Some(t) => Some((t.clone(), tools::check_tools(t)?)),
        None => None,
    };
    let msgs = b
        .messages
        .ok_or_else(|| ApiError::invalid("messages is required"))?;
    let mut images = Images::new(&st.inference.images);
    let messages = msgs
        .into_iter()
        .map(|o| o.into_message_with(&mut images))
        .collect::<Result<Vec<Message>, _>>()?;
    // Built-in tools join a free answer, not one constrained to a JSON format.
    let free = structured::ollama_format(b.format.as_ref())?.is_none();
    let scope = Scope::Request(caller.owner().to_string());
    let plan = plan::plan(&st.code, &m, &b.skills, scope, free).await?;
    let messages = plan.messages(&m, &messages);
    images.check_agent(plan.agent.is_some())?;
    if let Some(agent) = plan.agent {
        let client = tools
            .map(|(defs, names)| ClientTools { defs, names })
            .unwrap_or_default();
        let r = LoopRequest {
            messages,
            client,
            options: b.options,
            format: b.format,
            stream: b.stream.unwrap_or(true),
        };
        return super::tool_loop::respond(st, m, agent, r).await;
    }
    let defs = tools.as_ref().map(|t| t.0.as_slice());
    let think = Think::enabled(think);
    let constrained = !free;
    let prompt = generate::constrained_chat_prompt(&m, &messages, defs, "", &think, constrained)?;
    let prompt = images.attach(&m, st.inference.n_ctx, prompt).await?;
    let mut req = super::generate::request(&st, &m, prompt.ids, b.options, b.format.as_ref())?;
    req.media = prompt.media;
    let reply = Reply {
        shape: Shape::Chat,
        tools: tools.map(|t| t.1),
        reasoning: prompt.reasoning,
        keep_thinking: think.enabled != Some(false),
    };
    respond(m, req, b.stream.unwrap_or(true), reply).await
}
