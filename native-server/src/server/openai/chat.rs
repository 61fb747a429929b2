//! `POST /v1/chat/completions`: the conversation rendered with the model's chat template, tools
//! offered (and forced by `tool_choice`), structured output, logprobs, `n` choices; streamed as
//! SSE chunks or answered whole.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use weft_core::chat::Message;
use weft_core::scheduler::{Event, Summary, TokenInfo};

use super::request::finish_reason;
use super::respond::{end_choice, stream_error, usage, Head};
use super::tool_loop::LoopRequest;
use super::types::{
    AssistantMessage, ChatChoice, ChatChunkChoice, ChatCompletion, ChatCompletionChunk, ChatDelta,
    ChatLogprobs, ChatRequest, LogprobEntry, OpenAiToolCall, TopLogprob, Usage,
};
use super::Res;
use crate::registry::{Lease, Loaded};
use crate::server::code::agent::{Agent, ClientTools};
use crate::server::code::plan::{self, Scope};
use crate::server::common::tool_choice::{self, Offered, ToolChoice};
use crate::server::common::tools::{self, ToolStream};
use crate::server::error::{ApiError, OpenAiErrorBody};
use crate::server::extract::OpenAiJson;
use crate::server::generate::{self, collect};
use crate::server::state::Shared;
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
pub async fn chat(State(st): State<Shared>, OpenAiJson(b): OpenAiJson<ChatRequest>) -> Res {
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
    let m = st.lease_named(b.common.model.as_deref(), None).await?;
    let defs = b.tools.clone().unwrap_or_default();
    let tools = tool_choice::offer(b.tool_choice.as_ref(), defs, &m)?;
    let forced = tools.as_ref().and_then(|t| t.forced.as_ref());
    // Built-in tools join only a free choice: not under "none", a forced call, or a schema.
    let free = tool_choice::parse(b.tool_choice.as_ref())? != ToolChoice::None
        && forced.is_none()
        && json.is_none();
    let plan = plan::plan(&st, &m, &b.skills, Scope::Request, free).await?;
    let messages = plan.messages(&m, messages);
    if let Some(agent) = plan.agent {
        return with_builtin_tools(st, m, agent, b, messages, tools).await;
    }
    let (prompt, json) = generate::tool_chat_prompt(&m, &messages, tools.as_ref(), json)?;
    let lp = top_logprobs(b.logprobs, b.top_logprobs)?;
    let mut req = b.common.to_request(&st, &m, prompt, lp)?;
    req.json = json;
    let names = tools.map(|t| t.names);
    let n = req.n;
    let rx = generate::start(&m, req)?;
    let head = Head::new(&st, "chatcmpl", &m.name);
    if b.common.stream.unwrap_or(false) {
        let s = Stream {
            head,
            include_usage: b.common.include_usage(),
            logprobs: lp.is_some(),
        };
        return Ok(s.respond(m, rx, n, names));
    }
    let out = collect(rx, n).await?;
    let sums: Vec<&Summary> = out.iter().filter_map(|c| c.summary.as_ref()).collect();
    let choices = out
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (content, calls) = tools::split(&c.text, names.as_deref());
            let has_calls = !calls.is_empty();
            ChatChoice {
                index: i,
                message: AssistantMessage {
                    role: "assistant",
                    content: (!(has_calls && content.is_empty())).then_some(content),
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
    st: Shared,
    m: Lease,
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
        m: Lease,
        rx: generate::EventStream,
        n: usize,
        tools: Option<Vec<String>>,
    ) -> Response {
        let mut sums: Vec<Option<Summary>> = vec![None; n];
        // Per choice: holds back tool calls while streaming content.
        let mut held: Vec<Option<ToolStream>> =
            (0..n).map(|_| tools.clone().map(ToolStream::new)).collect();
        let f = move |ev: Option<(usize, Event)>| -> (Vec<String>, bool) {
            let m: &Loaded = &m;
            match ev {
                None => (vec![], true),
                Some((i, Event::Started { .. })) => {
                    let delta = ChatDelta {
                        role: Some("assistant"),
                        content: Some(String::new()),
                        ..Default::default()
                    };
                    (vec![self.one(i, delta, None)], false)
                }
                Some((i, Event::Delta { text, tokens })) => {
                    let text = match held[i].as_mut() {
                        Some(ts) => ts.push(&text),
                        None => text,
                    };
                    if text.is_empty() && (!self.logprobs || tokens.is_empty()) {
                        return (vec![], false);
                    }
                    let choice = ChatChunkChoice {
                        index: i,
                        delta: ChatDelta {
                            content: Some(text),
                            ..Default::default()
                        },
                        logprobs: self.logprobs.then(|| chat_logprobs(m, &tokens)),
                        finish_reason: None,
                    };
                    (vec![self.chunk(vec![choice], None)], false)
                }
                Some((i, Event::Done(s))) => {
                    let mut out = Vec::new();
                    let (tail, calls) =
                        held[i].as_mut().map(ToolStream::finish).unwrap_or_default();
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
                    out.push(self.one(i, ChatDelta::default(), Some(finish)));
                    let usage_frame = |u| self.chunk(vec![], Some(u));
                    let frame: Option<&dyn Fn(Usage) -> String> =
                        self.include_usage.then_some(&usage_frame);
                    let ended = end_choice(&mut sums, i, s, frame, &mut out);
                    (out, ended)
                }
                Some((_, Event::Failed(e))) => (vec![stream_error(e)], true),
            }
        };
        sse(frames(rx, f))
    }
}
