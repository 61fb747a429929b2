//! Streams or collects one Ollama generation, and answers Ollama's empty request (load or
//! unload).

use axum::response::IntoResponse;
use axum::Json;
use serde_json::Value;
use weft_core::scheduler::{Event, Summary};

use super::types::{Frame, OllamaToolCall, Payload, ReplyMessage, StreamError, Timings};
use super::{now_rfc3339, Res};
use crate::registry::names;
use crate::server::auth::context::RequestCtx;
use crate::server::common::reply::ReplyParts;
use crate::server::common::tools::ToolCall;
use crate::server::error::ApiError;
use crate::server::generate::finish_reason;
use crate::server::generate::{self, collect, GenRequest, Reasoning};
use crate::server::leased::Leased;
use crate::server::ollama::OllamaState;
use crate::server::stream::{frames, json_frame, ndjson};

/// Which of Ollama's two response shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Chat,
    Generate,
}

impl Shape {
    fn payload(self, text: String, calls: &[ToolCall]) -> Payload {
        match self {
            Shape::Chat => Payload::Chat {
                message: ReplyMessage {
                    role: "assistant",
                    content: text,
                    thinking: None,
                    tool_calls: (!calls.is_empty())
                        .then(|| calls.iter().map(OllamaToolCall::from).collect()),
                    executed_calls: None,
                },
            },
            Shape::Generate => Payload::Generate {
                response: text,
                thinking: None,
            },
        }
    }

    pub(super) fn frame(self, model: &str, text: String, calls: &[ToolCall]) -> Frame {
        Frame {
            model: model.to_string(),
            created_at: now_rfc3339(),
            payload: self.payload(text, calls),
            done: false,
            done_reason: None,
            timings: None,
        }
    }

    /// The final frame.
    pub(super) fn last(self, model: &str, text: String, calls: &[ToolCall], s: &Summary) -> Frame {
        Frame {
            done: true,
            done_reason: Some(finish_reason(s)),
            timings: Some(timings(s)),
            ..self.frame(model, text, calls)
        }
    }
}

impl Frame {
    /// The frame with reasoning text (none when empty).
    pub(super) fn with_thinking(mut self, text: String) -> Frame {
        let t = (!text.is_empty()).then_some(text);
        match &mut self.payload {
            Payload::Chat { message } => message.thinking = t,
            Payload::Generate { thinking, .. } => *thinking = t,
        }
        self
    }
}

/// Final-frame figures: durations in nanoseconds, counts, cache hits.
fn timings(s: &Summary) -> Timings {
    let ns = |secs: f64| (secs * 1e9) as u64;
    let ratio = if s.prompt_tokens > 0 {
        s.cached_tokens as f64 / s.prompt_tokens as f64
    } else {
        0.0
    };
    Timings {
        total_duration: ns(s.queue_secs + s.prompt_secs + s.gen_secs),
        load_duration: 0,
        prompt_eval_count: s.prompt_tokens,
        prompt_eval_duration: ns(s.prompt_secs),
        eval_count: s.completion_tokens,
        eval_duration: ns(s.gen_secs),
        prompt_cache_hit_tokens: s.cached_tokens,
        prompt_cache_hit_ratio: ratio,
    }
}

/// How one Ollama reply is written: its shape, the declared tool names (when the reply may
/// call them), how its reasoning is told apart, and whether the request wants the reasoning
/// (`think: false` drops whatever the model still writes).
pub struct Reply {
    pub shape: Shape,
    pub tools: Option<Vec<String>>,
    pub reasoning: Reasoning,
    pub keep_thinking: bool,
}

/// Streams (NDJSON) or collects one generation.
pub async fn respond(m: Leased, req: GenRequest, stream: bool, r: Reply) -> Res {
    let rx = generate::start(&m, req)?;
    let name = names::tagged(&m.name);
    let shape = r.shape;
    let mut parts = ReplyParts::new(r.reasoning, r.tools, r.keep_thinking);
    if !stream {
        let out = collect(rx, 1).await?;
        let c = &out[0];
        let s = c
            .summary
            .as_ref()
            .ok_or_else(|| ApiError::internal("no summary"))?;
        let (thinking, text, calls) = parts.whole(&c.text);
        let frame = shape.last(&name, text, &calls, s).with_thinking(thinking);
        return Ok(Json(frame).into_response());
    }
    // The closure owns the lease: the model stays loaded until the stream ends.
    let f = move |ev: Option<(usize, Event)>| -> (Vec<String>, bool) {
        let _hold = &m;
        match ev {
            None => (vec![], true),
            Some((_, Event::Started { .. } | Event::Queued { .. })) => (vec![], false),
            Some((_, Event::Delta { text, .. })) => {
                let (thinking, text) = parts.push(&text);
                if text.is_empty() && thinking.is_empty() {
                    return (vec![], false);
                }
                let frame = shape.frame(&name, text, &[]).with_thinking(thinking);
                (vec![json_frame(&frame)], false)
            }
            Some((_, Event::Done(s))) => {
                let mut out = Vec::new();
                let (thinking, tail, calls) = parts.finish();
                if !tail.is_empty() || !calls.is_empty() || !thinking.is_empty() {
                    // Ollama sends calls in a message of their own before the final frame.
                    let frame = shape.frame(&name, tail, &calls).with_thinking(thinking);
                    out.push(json_frame(&frame));
                }
                out.push(json_frame(&shape.last(&name, String::new(), &[], &s)));
                (out, true)
            }
            Some((_, Event::Failed(e))) => {
                let error = generate::failure(e).message;
                (vec![json_frame(&StreamError { error })], true)
            }
        }
    };
    Ok(ndjson(frames(rx, f)))
}

/// Ollama's empty request: load the model (keep it per `keep_alive`), or with `keep_alive: 0`
/// unload it; answers with one final frame whose `done_reason` is `load` or `unload`.
pub async fn load_or_unload(
    st: &OllamaState,
    ctx: &RequestCtx,
    model: Option<&str>,
    keep_alive: Option<&Value>,
    shape: Shape,
) -> Res {
    let name = model
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("model is required"))?;
    let ka = keep_alive
        .filter(|v| !v.is_null())
        .map(crate::registry::KeepAlive::from_json)
        .transpose()?;
    let (name, reason) = if ka.is_some_and(|k| k.is_zero()) {
        // Only a model the caller may use can be unloaded by it.
        let scope = crate::server::inference::admission::ctx_scope(&st.inference, ctx).await?;
        let r = st.registry.with_catalog(|c| c.resolve_in(name, &scope))?;
        st.registry.unload(&r.name)?;
        (r.name, "unload")
    } else {
        let lease = st.inference.lease(ctx, Some(name), keep_alive).await?;
        (lease.name.clone(), "load")
    };
    let frame = Frame {
        done: true,
        done_reason: Some(reason),
        ..shape.frame(&names::tagged(&name), String::new(), &[])
    };
    Ok(Json(frame).into_response())
}
