//! The chat-UI stream: SSE `token` / `thinking` frames and a terminal `done` frame
//! (tokenCount, elapsed, tokPerSec, promptTokens, kvReusedTokens, kvReusePercent).
//!
//! A session tracks its conversation: a request may send only the new turn (it is appended to
//! the tracked history) or the whole conversation (used as is when it starts with the tracked
//! history). The prefix cache then reuses the previous turn's tokens.

use axum::extract::State;
use weft_core::chat::{self, Message};
use weft_core::scheduler::{Event, Finish, Summary};

use super::tool_loop::LoopRequest;
use super::types::{DoneFrame, UiChatRequest, UiFrame, UiToolCall};
use crate::server::auth::caller::Caller;
use crate::server::auth::context::RequestCtx;
use crate::server::code::agent::ClientTools;
use crate::server::code::plan::{self, Scope};
use crate::server::common::images::Images;
use crate::server::common::reply::ReplyParts;
use crate::server::common::sampling::SamplingFields;
use crate::server::common::tools::{self, ToolCall};
use crate::server::conversations::{default_session, unknown};
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::extract::ApiJson;
use crate::server::generate::finish_reason;
use crate::server::generate::{self, GenRequest, Think};
use crate::server::stream::{frames, json_frame, sse};
use crate::server::ui::UiState;

type Res = Result<axum::response::Response, PlainError>;

#[utoipa::path(post, path = "/ui/chat", tag = "chat-ui", request_body = UiChatRequest,
    responses((status = 200, description = "SSE frames: token, thinking, then done",
               content((UiFrame = "text/event-stream"))),
              (status = 400, body = PlainErrorBody), (status = 404, body = PlainErrorBody)))]
pub async fn ui_chat(
    State(st): State<UiState>,
    ctx: RequestCtx,
    caller: Caller,
    ApiJson(v): ApiJson<serde_json::Value>,
) -> Res {
    let v = super::attachments::apply(&st, caller.owner(), v).await?;
    chat(st, ctx, caller, crate::server::extract::from_value(v)?).await
}

fn same(a: &Message, b: &Message) -> bool {
    a.role == b.role && a.content == b.content
}

pub(super) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// A `thinking` frame and a `token` frame for the reasoning and answer text that have them;
/// the answer is added to `reply`.
pub(super) fn text_frames(thinking: String, answer: String, reply: &mut String) -> Vec<String> {
    let mut out = Vec::new();
    if !thinking.is_empty() {
        out.push(json_frame(&UiFrame::Thinking { thinking }));
    }
    if !answer.is_empty() {
        reply.push_str(&answer);
        out.push(json_frame(&UiFrame::Token { token: answer }));
    }
    out
}

/// Records the finished turn as the conversation of `owner`'s session (with the client's tool
/// calls the reply made, so the next turn can answer them with `tool` messages).
pub(super) fn remember(
    st: &UiState,
    owner: &str,
    sid: &str,
    conversation: &[Message],
    reply: &str,
    calls: &[ToolCall],
) {
    let mut message = Message::assistant(reply.to_string());
    if !calls.is_empty() {
        message.tool_calls = Some(
            calls
                .iter()
                .map(|c| chat::ToolCall {
                    id: None,
                    kind: "function".into(),
                    function: chat::FunctionCall {
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    },
                })
                .collect(),
        );
    }
    let mut h = conversation.to_vec();
    h.push(message);
    st.sessions
        .save(owner, sid, h, sid == default_session(owner));
}

/// The frame of the client's calls, when the reply made any.
pub(super) fn calls_frame(calls: &[ToolCall]) -> Option<String> {
    (!calls.is_empty()).then(|| {
        json_frame(&UiFrame::ToolCalls {
            tool_calls: calls
                .iter()
                .map(|c| UiToolCall {
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
        })
    })
}

/// The frame of a request waiting for a slot.
pub(super) fn queue_frame(position: usize, pending: usize) -> String {
    json_frame(&UiFrame::Queue {
        queue_position: position,
        queue_pending: pending,
    })
}

/// The terminal frame of a finished reply (`s`: its figures, all turns added up).
pub(super) fn done_frame(s: &Summary, elapsed: f64, sid: &str) -> String {
    let pct = if s.prompt_tokens > 0 {
        100.0 * s.cached_tokens as f64 / s.prompt_tokens as f64
    } else {
        0.0
    };
    let tps = if s.gen_secs > 0.0 {
        s.completion_tokens as f64 / s.gen_secs
    } else {
        0.0
    };
    json_frame(&UiFrame::Done(Box::new(DoneFrame {
        done: true,
        token_count: s.completion_tokens,
        elapsed,
        tok_per_sec: round3(tps),
        aborted: s.finish == Finish::Cancelled,
        error: None,
        session_id: sid.to_string(),
        prompt_tokens: s.prompt_tokens,
        kv_reused_tokens: s.cached_tokens,
        kv_reuse_percent: round3(pct),
        finish_reason: Some(finish_reason(s)),
    })))
}

/// The terminal frame of a failed reply.
pub(super) fn error_frame(error: String, elapsed: f64, sid: &str) -> String {
    json_frame(&UiFrame::Done(Box::new(DoneFrame {
        done: true,
        token_count: 0,
        elapsed,
        tok_per_sec: 0.0,
        aborted: false,
        error: Some(error),
        session_id: sid.to_string(),
        prompt_tokens: 0,
        kv_reused_tokens: 0,
        kv_reuse_percent: 0.0,
        finish_reason: None,
    })))
}

/// The chat-UI chat of `caller`, from a parsed body: only the caller's own sessions (another
/// principal's id is a 404 like an unknown one), its own default session when none is named.
pub async fn chat(st: UiState, ctx: RequestCtx, caller: Caller, b: UiChatRequest) -> Res {
    let owner = caller.owner().to_string();
    let default = default_session(&owner);
    let m = st.inference.lease(&ctx, b.model.as_deref(), None).await?;
    let tools = match b.tools.as_ref().filter(|t| !t.is_empty()) {
        Some(t) => Some(ClientTools {
            names: tools::check_tools(t)?,
            defs: t.clone(),
        }),
        None => None,
    };
    let sid = b.session_id.clone().unwrap_or_else(|| default.clone());
    let new = b.messages.unwrap_or_default();
    if new.is_empty() {
        return Err(ApiError::invalid("messages must not be empty").into());
    }
    let conversation = {
        let hist = match st.sessions.get(&owner, &sid).await? {
            Some(h) => h,
            None if sid == default => Vec::new(),
            None => return Err(unknown(&sid).into()),
        };
        let hist = if b.new_chat { Vec::new() } else { hist };
        let starts_with_hist =
            new.len() >= hist.len() && hist.iter().zip(&new).all(|(a, b)| same(a, b));
        if starts_with_hist {
            new
        } else {
            hist.iter().cloned().chain(new).collect()
        }
    };
    let scope = Scope::Session(owner.clone(), sid.clone());
    let plan = plan::plan(&st.code, &m, &b.skills, scope, true).await?;
    let mut for_model = plan.messages(&m, &conversation);
    // Uploaded images (`imagePaths`, made image parts by `attachments.rs`).
    let images = Images::from_openai(&st.inference.images, &mut for_model, plan.agent.is_some())?;
    let req_sampling = SamplingFields {
        temperature: b.temperature,
        top_k: b.top_k,
        top_p: b.top_p,
        min_p: b.min_p,
        repeat_penalty: b.repeat_penalty,
        seed: b.seed,
        ..Default::default()
    };
    let sampling = st
        .inference
        .resolve_sampling(&req_sampling, Default::default())?;
    if let Some(agent) = plan.agent {
        let r = LoopRequest {
            owner,
            sid,
            conversation,
            for_model,
            client: tools.unwrap_or_default(),
            sampling,
            max_tokens: b.max_tokens,
        };
        return Ok(super::tool_loop::respond(st, m, agent, r));
    }
    let think = Think::enabled(b.think);
    let defs = tools.as_ref().map(|t| t.defs.as_slice());
    let prompt = generate::chat_prompt(&m, &for_model, defs, "", &think)?;
    let prompt = images.attach(&m, st.inference.n_ctx, prompt).await?;
    let max_tokens = st
        .inference
        .tokens_to_generate(prompt.ids.len(), b.max_tokens)?;
    let names = tools.map(|t| t.names);
    let mut parts = ReplyParts::new(prompt.reasoning, names, think.enabled != Some(false));
    let mut req = GenRequest::plain(prompt.ids, sampling, max_tokens);
    req.media = prompt.media;
    let rx = generate::start(&m, req)?;
    let started = std::time::Instant::now();
    let mut reply = String::new();
    let st2 = st.clone();
    // The closure owns the lease: the model stays loaded until the stream ends.
    let f = move |ev: Option<(usize, Event)>| -> (Vec<String>, bool) {
        let _hold = &m;
        let elapsed = round3(started.elapsed().as_secs_f64());
        match ev {
            None => (vec![], true),
            Some((_, Event::Queued { position, pending })) => {
                (vec![queue_frame(position, pending)], false)
            }
            Some((_, Event::Started { .. })) => (vec![], false),
            Some((_, Event::Delta { text, .. })) => {
                let (thinking, answer) = parts.push(&text);
                (text_frames(thinking, answer, &mut reply), false)
            }
            Some((_, Event::Done(s))) => {
                let (thinking, answer, calls) = parts.finish();
                let mut out = text_frames(thinking, answer, &mut reply);
                out.extend(calls_frame(&calls));
                if s.finish != Finish::Cancelled {
                    remember(&st2, &owner, &sid, &conversation, &reply, &calls);
                }
                out.push(done_frame(&s, elapsed, &sid));
                (out, true)
            }
            Some((_, Event::Failed(e))) => (vec![error_frame(e.to_string(), elapsed, &sid)], true),
        }
    };
    Ok(sse(frames(rx, f)))
}
