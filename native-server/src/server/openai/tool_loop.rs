//! `/v1/chat/completions` when the server answers built-in tool calls itself (`--code-exec`,
//! `skills`): the loop runs in `server/code/agent.rs`; this file shapes its result as a chat
//! completion, or as SSE chunks streaming the content of every round. The executed calls ride
//! along as `message.executed_calls` (the last chunk's `delta.executed_calls` when streamed).

use axum::response::{IntoResponse, Response};
use axum::Json;
use weft_core::chat::Message;

use super::respond::{usage, Head};
use super::types::{
    AssistantMessage, ChatChoice, ChatChunkChoice, ChatCompletion, ChatCompletionChunk, ChatDelta,
    Common, OpenAiToolCall, Usage,
};
use super::Res;
use crate::server::code::agent::{Activity, Agent, ClientTools, End, Outcome, Reply, Step};
use crate::server::common::tools::ToolCall;
use crate::server::generate::finish_reason;
use crate::server::leased::Leased;
use crate::server::openai::OpenAiState;
use crate::server::stream::{frames, json_frame, sse};

/// Everything the loop needs from the request.
pub struct LoopRequest {
    pub messages: Vec<Message>,
    pub client: ClientTools,
    pub common: Common,
    pub head: Head,
}

/// Content, client calls and finish reason of how a run ended.
fn ending(end: &End) -> (&Reply, Vec<OpenAiToolCall>, &'static str) {
    match end {
        End::Final(r) => (r, Vec::new(), finish_reason(&r.summary)),
        End::ClientCalls(r) => {
            let calls = r
                .calls
                .iter()
                .enumerate()
                .map(|(k, c)| {
                    let call = ToolCall {
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    };
                    OpenAiToolCall::from_call(&call, Some(k))
                })
                .collect();
            (r, calls, "tool_calls")
        }
    }
}

fn run_usage(o: &Outcome) -> Usage {
    usage(&[&o.total()])
}

pub async fn respond(st: OpenAiState, m: Leased, agent: Agent, r: LoopRequest) -> Res {
    let stream = r.common.stream.unwrap_or(false);
    let include_usage = r.common.include_usage();
    let common = r.common;
    let st2 = st.clone();
    let make_req = move |m: &Leased, prompt| common.to_request(&st2.inference, m, prompt, None);
    if stream {
        let rx = agent.spawn(m, r.messages, r.client, Box::new(make_req));
        return Ok(stream_steps(r.head, include_usage, rx));
    }
    let out = agent.run(&m, &r.messages, &r.client, make_req, None).await;
    agent.finish().await;
    let out = out?;
    let (reply, calls, finish) = ending(&out.end);
    let calls: Vec<OpenAiToolCall> = calls
        .into_iter()
        .map(|c| OpenAiToolCall { index: None, ..c })
        .collect();
    let has_calls = !calls.is_empty();
    let message = AssistantMessage {
        role: "assistant",
        content: (!(has_calls && reply.content.is_empty())).then(|| reply.content.clone()),
        reasoning_content: None,
        refusal: None,
        tool_calls: has_calls.then_some(calls),
        executed_calls: (!out.executed.is_empty()).then(|| out.executed.clone()),
    };
    let h = r.head;
    Ok(Json(ChatCompletion {
        id: h.id,
        object: "chat.completion",
        created: h.created,
        model: h.model,
        system_fingerprint: h.fingerprint,
        choices: vec![ChatChoice {
            index: 0,
            message,
            logprobs: None,
            finish_reason: Some(finish),
        }],
        usage: run_usage(&out),
    })
    .into_response())
}

/// SSE chunks: the role, every round's content as it is generated, then the client's calls (if
/// the run ended with them), the finish chunk with `executed_calls`, usage and `[DONE]`.
fn stream_steps(
    head: Head,
    include_usage: bool,
    rx: tokio::sync::mpsc::UnboundedReceiver<Step>,
) -> Response {
    let chunk = move |delta: Option<ChatDelta>, finish, usage| {
        json_frame(&ChatCompletionChunk {
            id: head.id.clone(),
            object: "chat.completion.chunk",
            created: head.created,
            model: head.model.clone(),
            system_fingerprint: head.fingerprint.clone(),
            choices: delta
                .map(|delta| {
                    vec![ChatChunkChoice {
                        index: 0,
                        delta,
                        logprobs: None,
                        finish_reason: finish,
                    }]
                })
                .unwrap_or_default(),
            usage,
        })
    };
    let mut started = false;
    let f = move |step: Option<Step>| -> (Vec<String>, bool) {
        let mut out = Vec::new();
        if !started {
            started = true;
            let role = ChatDelta {
                role: Some("assistant"),
                content: Some(String::new()),
                ..Default::default()
            };
            out.push(chunk(Some(role), None, None));
        }
        match step {
            None => return (out, true),
            Some(Step::Activity(Activity::Text(t))) => {
                let d = ChatDelta {
                    content: Some(t),
                    ..Default::default()
                };
                out.push(chunk(Some(d), None, None));
            }
            Some(Step::Activity(_)) => {}
            Some(Step::End(Err(e))) => {
                out.push(json_frame(&e.openai_body()));
                return (out, true);
            }
            Some(Step::End(Ok(o))) => {
                let (_, calls, finish) = ending(&o.end);
                if !calls.is_empty() {
                    let d = ChatDelta {
                        tool_calls: Some(calls),
                        ..Default::default()
                    };
                    out.push(chunk(Some(d), None, None));
                }
                let d = ChatDelta {
                    executed_calls: (!o.executed.is_empty()).then(|| o.executed.clone()),
                    ..Default::default()
                };
                // The finish chunk carries usage (as the peer server sends it); `include_usage`
                // adds OpenAI's own usage chunk.
                out.push(chunk(Some(d), Some(finish), Some(run_usage(&o))));
                if include_usage {
                    out.push(chunk(None, None, Some(run_usage(&o))));
                }
                out.push("[DONE]".into());
                return (out, true);
            }
        }
        (out, false)
    };
    sse(frames(rx, f))
}
