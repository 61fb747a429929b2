//! `POST /v1/responses`: the conversation (a previous response's, then this input) rendered
//! with the model's chat template, function tools offered (and forced by `tool_choice`),
//! `text.format` as constrained decoding; answered whole or streamed as typed events, and
//! stored unless `store` is false.

use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};

use super::input;
use super::output;
use super::stream::{self, Events, Keep};
use super::types::{CreateRequest, Item, ResponseObject, StreamEvent};
use crate::server::auth::caller::Caller;
use crate::server::auth::context::RequestCtx;
use crate::server::common::ids;
use crate::server::common::images::Images;
use crate::server::common::structured::text_format;
use crate::server::common::tool_choice;
use crate::server::common::tools;
use crate::server::error::{ApiError, OpenAiErrorBody};
use crate::server::extract::OpenAiJson;
use crate::server::generate::{self, collect};
use crate::server::openai::types::Common;
use crate::server::openai::OpenAiState;
use crate::server::openai::Res;

/// Fields this server does not implement and that would change the result if ignored: 400.
fn refuse_unsupported(b: &CreateRequest) -> Result<(), ApiError> {
    let set = [
        ("include", b.include.as_ref().is_some_and(|v| !v.is_empty())),
        (
            "reasoning",
            b.reasoning.as_ref().is_some_and(|v| !v.is_null()),
        ),
        ("background", b.background == Some(true)),
        (
            "conversation",
            b.conversation.as_ref().is_some_and(|v| !v.is_null()),
        ),
        ("prompt", b.prompt.as_ref().is_some_and(|v| !v.is_null())),
        ("top_logprobs", b.top_logprobs.is_some_and(|n| n > 0)),
        ("max_tool_calls", b.max_tool_calls.is_some()),
    ];
    if let Some((field, _)) = set.iter().find(|(_, on)| *on) {
        return Err(ApiError::invalid(format!(
            "{field} is not supported by this server"
        )));
    }
    if let Some(t) = b
        .truncation
        .as_deref()
        .filter(|t| !["auto", "disabled"].contains(t))
    {
        return Err(ApiError::invalid(format!(
            "truncation must be \"auto\" or \"disabled\", got {t:?}"
        )));
    }
    if let Some(n) = b.max_output_tokens.filter(|&n| n < 1) {
        return Err(ApiError::invalid(format!(
            "max_output_tokens must be at least 1, got {n}"
        )));
    }
    let too_long = |(k, v): (&String, &String)| k.chars().count() > 64 || v.chars().count() > 512;
    if b.metadata
        .as_ref()
        .is_some_and(|m| m.len() > 16 || m.iter().any(too_long))
    {
        return Err(ApiError::invalid(
            "metadata holds at most 16 pairs, keys up to 64 characters and values up to 512",
        ));
    }
    Ok(())
}

/// Responses-shape function tools (`{"type": "function", "name", "description",
/// "parameters", "strict"}`) in the chat-completions shape templates and tool parsing take.
/// Built-in tools (web search, file search, …) are a 400.
fn function_tools(tools: &[Value]) -> Result<Vec<Value>, ApiError> {
    tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let o = t
                .as_object()
                .ok_or_else(|| ApiError::invalid(format!("tools[{i}] must be an object")))?;
            match o.get("type").and_then(Value::as_str) {
                Some("function") => {}
                other => {
                    return Err(ApiError::invalid(format!(
                        "tools[{i}].type {other:?} is not supported: only function tools"
                    )))
                }
            }
            if o.get("name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(ApiError::invalid(format!("tools[{i}].name is required")));
            }
            let mut function = o.clone();
            function.remove("type");
            Ok(json!({"type": "function", "function": function}))
        })
        .collect()
}

/// The in-progress response a request makes, echoing its settings; `temperature` and
/// `top_p` are the values sampling uses.
pub fn draft(b: &CreateRequest, model: &str, temperature: f32, top_p: f32) -> ResponseObject {
    ResponseObject {
        id: format!("resp_{}", ids::unique()),
        object: "response",
        created_at: crate::server::clock::now_unix(),
        status: "in_progress",
        completed_at: None,
        incomplete_details: None,
        error: None,
        model: model.to_string(),
        output: Vec::new(),
        usage: None,
        instructions: b.instructions.clone(),
        max_output_tokens: b.max_output_tokens,
        metadata: b.metadata.clone().unwrap_or_default(),
        parallel_tool_calls: b.parallel_tool_calls.unwrap_or(true),
        previous_response_id: b.previous_response_id.clone(),
        store: b.store.unwrap_or(true),
        temperature,
        top_p,
        text: b
            .text
            .clone()
            .filter(|t| t.get("format").is_some_and(|f| !f.is_null()))
            .unwrap_or_else(|| json!({"format": {"type": "text"}})),
        tool_choice: b.tool_choice.clone().unwrap_or_else(|| json!("auto")),
        tools: b.tools.clone().unwrap_or_default(),
        truncation: b.truncation.clone().unwrap_or_else(|| "disabled".into()),
        user: b.user.clone(),
        background: false,
    }
}

#[cfg(test)]
pub fn sample_draft() -> ResponseObject {
    draft(&CreateRequest::default(), "m", 1.0, 1.0)
}

/// The conversation the request continues (`previous_response_id`: 404 when the caller has
/// no such stored response, whether it is missing or another principal's) followed by its
/// own input.
async fn conversation(
    st: &OpenAiState,
    caller: &Caller,
    b: &CreateRequest,
) -> Result<Vec<Item>, ApiError> {
    let new = input::parse(b.input.as_ref())?;
    let Some(id) = b.previous_response_id.as_deref() else {
        return Ok(new);
    };
    let prev = st.responses.get(caller.owner(), id).await?.ok_or_else(|| {
        ApiError::not_found_code(
            "previous_response_not_found",
            format!("Previous response with id '{id}' not found."),
        )
    })?;
    let mut items = prev.conversation()?;
    items.extend(new);
    Ok(items)
}

#[utoipa::path(post, path = "/responses", tag = "openai", request_body = CreateRequest,
    responses(
        (status = 200, description = "A response, or typed SSE events when stream is true",
         content((ResponseObject = "application/json"), (StreamEvent = "text/event-stream"))),
        (status = 400, body = OpenAiErrorBody), (status = 404, body = OpenAiErrorBody),
        (status = 429, body = OpenAiErrorBody)))]
pub async fn create(
    State(st): State<OpenAiState>,
    ctx: RequestCtx,
    caller: Caller,
    OpenAiJson(b): OpenAiJson<CreateRequest>,
) -> Res {
    refuse_unsupported(&b)?;
    let items = conversation(&st, &caller, &b).await?;
    let mut messages = input::to_messages(b.instructions.as_deref(), &items);
    let images = Images::from_openai(&st.inference.images, &mut messages, false)?;
    let format = text_format(b.text.as_ref())?;
    let defs = function_tools(b.tools.as_deref().unwrap_or_default())?;
    let m = st
        .inference
        .lease_named(&ctx, b.model.as_deref(), None)
        .await?;
    let offered = tool_choice::offer(b.tool_choice.as_ref(), defs, &m)?;
    // No reasoning output items yet: reasoning is switched off where the template can.
    let think = generate::Think::enabled(Some(false));
    let (prompt, json) =
        generate::tool_chat_prompt(&m, &messages, offered.as_ref(), format, &think)?;
    let prompt = images.attach(&m, st.inference.n_ctx, prompt).await?;
    let common = Common {
        temperature: b.temperature,
        top_p: b.top_p,
        max_tokens: b.max_output_tokens,
        ..Default::default()
    };
    let mut req = common.to_request(&st.inference, &m, prompt.ids, None)?;
    req.json = json;
    req.media = prompt.media;
    let draft = draft(&b, &m.name, req.sampling.temperature, req.sampling.top_p);
    let names = offered.map(|o| o.names);
    let rx = generate::start(&m, req)?;
    let keep = draft.store.then(|| Keep {
        store: st.responses.clone(),
        owner: caller.owner().to_string(),
        input: items,
    });
    if b.stream.unwrap_or(false) {
        return Ok(stream::respond(m, rx, Events::new(draft, names), keep));
    }
    let out = collect(rx, 1).await?;
    let c = &out[0];
    let s = c
        .summary
        .as_ref()
        .ok_or_else(|| ApiError::unavailable("the scheduler stopped"))?;
    let (text, calls) = tools::split(&c.text, names.as_deref());
    let items_out = output::items(&output::message_id(), &text, &calls, output::cut_short(s));
    let response = output::finished(&draft, items_out, s);
    // Stored before it is answered: a response the client holds can always be retrieved.
    if let Some(k) = keep {
        k.store.put(&k.owner, &response, &k.input).await?;
    }
    Ok(Json(response).into_response())
}
