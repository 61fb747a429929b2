//! `POST /v1/chat/completions`: the conversation rendered with the model's chat template, tools
//! offered (and forced by `tool_choice`), structured output, logprobs, `n` choices; streamed as
//! SSE chunks or answered whole.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use weft_core::chat::Message;
use weft_core::scheduler::{Event, Summary, TokenInfo};

use super::respond::{end_choice, stream_error, usage, Head};
use super::tool_loop::LoopRequest;
use super::types::{
    AssistantMessage, ChatChoice, ChatChunkChoice, ChatCompletion, ChatCompletionChunk, ChatDelta,
    ChatLogprobs, ChatRequest, LogprobEntry, OpenAiToolCall, TopLogprob, Usage,
};
use super::Res;
use crate::registry::Loaded;
use crate::server::auth::caller::Caller;
use crate::server::auth::context::RequestCtx;
use crate::server::code::agent::{Agent, ClientTools};
use crate::server::code::plan::{self, Scope};
use crate::server::common::images::Images;
use crate::server::common::reply::ReplyParts;
use crate::server::common::tool_choice::{self, Offered, ToolChoice};
use crate::server::common::video;
use crate::server::error::{ApiError, OpenAiErrorBody};
use crate::server::extract::OpenAiJson;
use crate::server::generate::finish_reason;
use crate::server::generate::{self, collect, Reasoning, Think};
use crate::server::leased::Leased;
use crate::server::openai::OpenAiState;
use crate::server::stream::{frames, json_frame, sse};

/// `finish_reason`, "tool_calls" when the reply ended normally with calls.
fn finish_with_calls(s: &Summary, calls: bool) -> &'static str {
    match finish_reason(s) {
        "stop" if calls => "tool_calls",
        r => r,
    }
}

/// Chat-style logprobs entries.
fn chat_logprobs(m: &Loaded, tokens: &[TokenInfo]) -> ChatLogprobs {
    let top = |id: u32, logprob: f32| {
        let (token, bytes) = generate::token_text(m, id);
        TopLogprob {
            token,
            logprob,
            bytes,
        }
    };
    let content = tokens
        .iter()
        .map(|t| {
            let e = top(t.id, t.logprob.unwrap_or(0.0));
            LogprobEntry {
                token: e.token,
                logprob: e.logprob,
                bytes: e.bytes,
                top_logprobs: t.top.iter().map(|&(id, lp)| top(id, lp)).collect(),
            }
        })
        .collect();
    ChatLogprobs { content }
}

fn top_logprobs(logprobs: Option<bool>, top: Option<i64>) -> Result<Option<usize>, ApiError> {
    match (logprobs.unwrap_or(false), top) {
        (_, Some(t)) if !(0..=20).contains(&t) => Err(ApiError::invalid(format!(
            "top_logprobs must be between 0 and 20, got {t}"
        ))),
        (false, Some(t)) if t > 0 => Err(ApiError::invalid("top_logprobs requires logprobs: true")),
        (true, t) => Ok(Some(t.unwrap_or(0) as usize)),
        (false, _) => Ok(None),
    }
}

/// Efforts OpenAI's `reasoning_effort` takes.
const EFFORTS: [&str; 6] = ["none", "minimal", "low", "medium", "high", "xhigh"];

/// The request's reasoning switch: `think`, else `reasoning_effort` (`"none"` is off), with
/// `chat_template_kwargs` as further template variables.
fn think(b: &ChatRequest) -> Result<Think, ApiError> {
    let enabled = match (b.think, b.reasoning_effort.as_deref()) {
        (Some(on), _) => Some(on),
        (None, Some(e)) if EFFORTS.contains(&e) => Some(e != "none"),
        (None, Some(e)) => {
            return Err(ApiError::invalid(format!(
                "reasoning_effort must be one of {}, got {e:?}",
                EFFORTS.join(", ")
            )))
        }
        (None, None) => None,
    };
    Ok(Think {
        enabled,
        template_vars: b.chat_template_kwargs.clone().unwrap_or_default(),
    })
}

/// Roles OpenAI's chat API accepts.
const ROLES: [&str; 6] = [
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

#[utoipa::path(post, path = "/chat/completions", tag = "openai", request_body = ChatRequest,
    responses(
        (status = 200, description = "A chat completion, or SSE chunks when stream is true",
         content((ChatCompletion = "application/json"), (ChatCompletionChunk = "text/event-stream"))),
        (status = 400, body = OpenAiErrorBody), (status = 404, body = OpenAiErrorBody),
        (status = 429, body = OpenAiErrorBody)))]
pub async fn chat(
    State(st): State<OpenAiState>,
    ctx: RequestCtx,
    caller: Caller,
    OpenAiJson(b): OpenAiJson<ChatRequest>,
) -> Res {
    let messages = b
        .messages
        .as_deref()
        .ok_or_else(|| ApiError::invalid("messages is required"))?;
    if let Some((i, m)) = messages
        .iter()
        .enumerate()
        .find(|(_, m)| !ROLES.contains(&m.role.as_str()))
    {
        return Err(ApiError::invalid(format!(
            "messages[{i}].role {:?} is not one of {}",
            m.role,
            ROLES.join(", ")
        ))
        .into());
    }
    let json = crate::server::common::structured::response_format(b.response_format.as_ref())?;
    let m = st
        .inference
        .lease_named(&ctx, b.common.model.as_deref(), None)
        .await?;
    let defs = b.tools.clone().unwrap_or_default();
    let tools = tool_choice::offer(b.tool_choice.as_ref(), defs, &m)?;
    let forced = tools.as_ref().and_then(|t| t.forced.as_ref());
    // Built-in tools join only a free choice: not under "none", a forced call, or a schema.
    let free = tool_choice::parse(b.tool_choice.as_ref())? != ToolChoice::None
        && forced.is_none()
        && json.is_none();
    // The files the built-in calls write become the caller's artifacts.
    let scope = Scope::Request(caller.owner().to_string());
    let plan = plan::plan(&st.code, &m, &b.skills, scope, free).await?;
    let mut messages = plan.messages(&m, messages);
    // `video_url` parts: decoded into frames first (off the runtime), then put in place with
    // the images.
    let videos = if plan.agent.is_none() {
        video::decode_parts(&st.inference.images, &m, st.inference.n_ctx, &messages).await?
    } else {
        Default::default()
    };
    let images = Images::new(&st.inference.images).with_videos(videos);
    let images = images.take_all(&mut messages, plan.agent.is_some())?;
    if let Some(agent) = plan.agent {
        return with_builtin_tools(st, m, agent, b, messages, tools).await;
    }
    let think = think(&b)?;
    let (prompt, json) = generate::tool_chat_prompt(&m, &messages, tools.as_ref(), json, &think)?;
    let prompt = images.attach(&m, st.inference.n_ctx, prompt).await?;
    let reasoning = prompt.reasoning;
    let lp = top_logprobs(b.logprobs, b.top_logprobs)?;
    let mut req = b.common.to_request(&st.inference, &m, prompt.ids, lp)?;
    req.json = json;
    req.media = prompt.media;
    let names = tools.map(|t| t.names);
    let n = req.n;
    let rx = generate::start(&m, req)?;
    let head = Head::new(&st, "chatcmpl", &m.name);
    if b.common.stream.unwrap_or(false) {
        let s = Stream {
            head,
            include_usage: b.common.include_usage(),
            logprobs: lp.is_some(),
            reasoning,
        };
        return Ok(s.respond(m, rx, n, names));
    }
    let out = collect(rx, n).await?;
    let sums: Vec<&Summary> = out.iter().filter_map(|c| c.summary.as_ref()).collect();
    let choices = out
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (thinking, content, calls) =
                ReplyParts::new(reasoning, names.clone(), true).whole(&c.text);
            let has_calls = !calls.is_empty();
            ChatChoice {
                index: i,
                message: AssistantMessage {
                    role: "assistant",
                    content: (!(has_calls && content.is_empty())).then_some(content),
                    reasoning_content: (!thinking.is_empty()).then_some(thinking),
                    refusal: None,
                    tool_calls: has_calls.then(|| {
                        calls
                            .iter()
                            .map(|t| OpenAiToolCall::from_call(t, None))
                            .collect()
                    }),
                    executed_calls: None,
                },
                logprobs: lp.map(|_| chat_logprobs(&m, &c.tokens)),
                finish_reason: c.summary.as_ref().map(|s| finish_with_calls(s, has_calls)),
            }
        })
        .collect();
    Ok(Json(ChatCompletion {
        id: head.id,
        object: "chat.completion",
        created: head.created,
        model: head.model,
        system_fingerprint: head.fingerprint,
        choices,
        usage: usage(&sums),
    })
    .into_response())
}

/// The chat answered through the server-side tool loop (`tool_loop.rs`).
async fn with_builtin_tools(
    st: OpenAiState,
    m: Leased,
    agent: Agent,
    b: ChatRequest,
    messages: Vec<Message>,
    tools: Option<Offered>,
) -> Res {
    if b.common.n.is_some_and(|n| n != 1) {
        agent.finish().await;
        return Err(
            ApiError::invalid("n must be 1 when the server executes built-in tools").into(),
        );
    }
    let client = tools
        .map(|t| ClientTools {
            defs: t.defs,
            names: t.names,
        })
        .unwrap_or_default();
    let head = Head::new(&st, "chatcmpl", &m.name);
    let r = LoopRequest {
        messages,
        client,
        common: b.common,
        head,
    };
    super::tool_loop::respond(st, m, agent, r).await
}

/// How one streamed chat response is written.
struct Stream {
    head: Head,
    include_usage: bool,
    logprobs: bool,
    reasoning: Reasoning,
}

impl Stream {
    fn chunk(&self, choices: Vec<ChatChunkChoice>, usage: Option<Usage>) -> String {
        let h = &self.head;
        json_frame(&ChatCompletionChunk {
            id: h.id.clone(),
            object: "chat.completion.chunk",
            created: h.created,
            model: h.model.clone(),
            system_fingerprint: h.fingerprint.clone(),
            choices,
            usage,
        })
    }

    /// A reasoning chunk, when there is reasoning text.
    fn thinking(&self, index: usize, text: String) -> Vec<String> {
        if text.is_empty() {
            return vec![];
        }
        let delta = ChatDelta {
            reasoning_content: Some(text),
            ..Default::default()
        };
        vec![self.one(index, delta, None)]
    }

    fn one(&self, index: usize, delta: ChatDelta, finish: Option<&'static str>) -> String {
        self.chunk(
            vec![ChatChunkChoice {
                index,
                delta,
                logprobs: None,
                finish_reason: finish,
            }],
            None,
        )
    }

    /// The SSE response; the closure owns the lease, so the model stays loaded until the
    /// stream ends.
    fn respond(
        self,
        m: Leased,
        rx: generate::EventStream,
        n: usize,
        tools: Option<Vec<String>>,
    ) -> Response {
        let mut sums: Vec<Option<Summary>> = vec![None; n];
        // Per choice: reasoning apart, tool calls held back while content streams.
        let mut parts: Vec<ReplyParts> = (0..n)
            .map(|_| ReplyParts::new(self.reasoning, tools.clone(), true))
            .collect();
        let f = move |ev: Option<(usize, Event)>| -> (Vec<String>, bool) {
            let m: &Loaded = &m;
            match ev {
                None => (vec![], true),
                Some((_, Event::Queued { .. })) => (vec![], false),
                Some((i, Event::Started { .. })) => {
                    let delta = ChatDelta {
                        role: Some("assistant"),
                        content: Some(String::new()),
                        ..Default::default()
                    };
                    (vec![self.one(i, delta, None)], false)
                }
                Some((i, Event::Delta { text, tokens })) => {
                    let (thinking, text) = parts[i].push(&text);
                    let mut out = self.thinking(i, thinking);
                    if !text.is_empty() || (self.logprobs && !tokens.is_empty()) {
                        let choice = ChatChunkChoice {
                            index: i,
                            delta: ChatDelta {
                                content: Some(text),
                                ..Default::default()
                            },
                            logprobs: self.logprobs.then(|| chat_logprobs(m, &tokens)),
                            finish_reason: None,
                        };
                        out.push(self.chunk(vec![choice], None));
                    }
                    (out, false)
                }
                Some((i, Event::Done(s))) => {
                    let (thinking, tail, calls) = parts[i].finish();
                    let mut out = self.thinking(i, thinking);
                    if !tail.is_empty() {
                        let delta = ChatDelta {
                            content: Some(tail),
                            ..Default::default()
                        };
                        out.push(self.one(i, delta, None));
                    }
                    if !calls.is_empty() {
                        let calls = calls
                            .iter()
                            .enumerate()
                            .map(|(k, t)| OpenAiToolCall::from_call(t, Some(k)))
                            .collect();
                        let delta = ChatDelta {
                            tool_calls: Some(calls),
                            ..Default::default()
                        };
                        out.push(self.one(i, delta, None));
                    }
                    let finish = finish_with_calls(&s, !calls.is_empty());
                    let total = end_choice(&mut sums, i, s);
                    // The last choice's finish chunk carries the usage of all (as the peer
                    // server sends it); `include_usage` adds OpenAI's own usage chunk.
                    let choice = ChatChunkChoice {
                        index: i,
                        delta: ChatDelta::default(),
                        logprobs: None,
                        finish_reason: Some(finish),
                    };
                    out.push(self.chunk(vec![choice], total.clone()));
                    let Some(total) = total else {
                        return (out, false);
                    };
                    if self.include_usage {
                        out.push(self.chunk(vec![], Some(total)));
                    }
                    out.push("[DONE]".into());
                    (out, true)
                }
                Some((_, Event::Failed(e))) => (vec![stream_error(e)], true),
            }
        };
        sse(frames(rx, f))
    }
}
