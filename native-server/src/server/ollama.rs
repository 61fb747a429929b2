//! The Ollama surface (`/api`): generate, chat (NDJSON streaming by default), tags, show, ps,
//! version. `/api/chat/ollama` is an alias of the Ollama chat; `/api/chat` itself is shared
//! with the chat-UI protocol (see `ui.rs` for the rule that tells them apart).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use weft_core::chat::Message;
use weft_core::scheduler::{Event, Summary};

use super::body::{frames, ndjson, parse, OneOrMany};
use super::error::{ApiError, PlainError};
use super::generate::{self, collect, GenRequest};
use super::openai::Options;
use super::sampling::resolve;
use super::state::{AppState, Shared};
use super::tools::{ToolCall, ToolStream};
use crate::registry::Lease;

type Res = Result<Response, PlainError>;

/// Routes under `/api` that speak Ollama (`/api/chat` is routed by `ui.rs`).
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/api/generate", post(generate_route))
        .route("/api/chat/ollama", post(chat_route))
        .route("/api/version", get(version))
        .merge(super::ollama_models::routes())
        .route("/api/embed", any(no_embeddings))
        .route("/api/embeddings", any(no_embeddings))
}

/// Ollama's embedding routes: this server serves a generative model, not an encoder.
async fn no_embeddings() -> Response {
    ApiError::not_implemented("embeddings are not implemented by this server").plain()
}

/// RFC 3339 UTC time of now.
fn now_rfc3339() -> String {
    super::state::rfc3339(std::time::SystemTime::now())
}

#[derive(Debug, Deserialize)]
struct OllamaMessage {
    role: String,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    images: Option<Vec<Value>>,
    /// Calls an assistant made earlier (`{"function": {"name", "arguments": {...}}}`).
    #[serde(default)]
    tool_calls: Option<Vec<weft_core::chat::ToolCall>>,
    /// On `tool` messages: which tool produced the content.
    #[serde(default)]
    tool_name: Option<String>,
}

impl OllamaMessage {
    fn into_message(self) -> Message {
        let mut m = Message::new(self.role, self.content.unwrap_or_default());
        m.tool_calls = self.tool_calls;
        m.name = self.tool_name;
        m
    }
}

#[derive(Debug, Deserialize)]
struct ChatBody {
    model: Option<String>,
    messages: Option<Vec<OllamaMessage>>,
    stream: Option<bool>,
    options: Option<Options>,
    format: Option<Value>,
    tools: Option<Vec<Value>>,
    keep_alive: Option<Value>,
    #[allow(dead_code)]
    think: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct GenerateBody {
    model: Option<String>,
    prompt: Option<String>,
    system: Option<String>,
    suffix: Option<String>,
    #[serde(default)]
    raw: bool,
    stream: Option<bool>,
    options: Option<Options>,
    format: Option<Value>,
    images: Option<Vec<Value>>,
    keep_alive: Option<Value>,
}

fn request(
    st: &AppState,
    m: &Lease,
    prompt: Vec<u32>,
    opts: Option<Options>,
    format: Option<&Value>,
) -> Result<GenRequest, ApiError> {
    let json = super::structured::ollama_format(format)?;
    let opts = opts.unwrap_or_default().or(Options::of_model(m));
    if let Some(c) = opts.num_ctx {
        if c <= 0 {
            return Err(ApiError::invalid(format!(
                "num_ctx must be positive, got {c}"
            )));
        }
        // The context is fixed at startup (--ctx); a different per-request value is ignored.
    }
    let sampling = resolve(
        &opts.sampling(),
        &st.cfg.sampling,
        st.cfg.precedence,
        Default::default(),
    )?;
    // Ollama: num_predict -1 (or -2) means "until the context fills".
    let requested = match opts.num_predict {
        Some(n) if n < 0 => None,
        n => n,
    };
    let max_tokens = generate::max_tokens(st, prompt.len(), requested)?;
    Ok(GenRequest {
        prompt,
        sampling,
        max_tokens,
        stop: opts.stop.map(OneOrMany::into_vec).unwrap_or_default(),
        logprobs: None,
        n: 1,
        ignore_eos: false,
        json,
    })
}

/// Final-frame fields: durations in nanoseconds, counts, cache hits.
fn final_fields(s: &Summary) -> Value {
    let ns = |secs: f64| (secs * 1e9) as u64;
    let ratio = if s.prompt_tokens > 0 {
        s.cached_tokens as f64 / s.prompt_tokens as f64
    } else {
        0.0
    };
    json!({"done": true, "done_reason": super::openai::finish_reason(s),
           "total_duration": ns(s.queue_secs + s.prompt_secs + s.gen_secs), "load_duration": 0,
           "prompt_eval_count": s.prompt_tokens, "prompt_eval_duration": ns(s.prompt_secs),
           "eval_count": s.completion_tokens, "eval_duration": ns(s.gen_secs),
           "prompt_cache_hit_tokens": s.cached_tokens, "prompt_cache_hit_ratio": ratio})
}

fn merge(mut a: Value, b: Value) -> Value {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}

/// Streams or collects one generation; `wrap(text)` makes the per-chunk payload
/// (`{"response": ..}` or `{"message": ..}`).
async fn respond(
    m: Lease,
    req: GenRequest,
    stream: bool,
    wrap: fn(&str) -> Value,
    tools: Option<Vec<String>>,
) -> Res {
    let rx = generate::start(&m, req)?;
    let name = crate::registry::names::tagged(&m.name);
    let mut held = tools.map(ToolStream::new);
    if !stream {
        let out = collect(rx, 1).await?;
        let c = &out[0];
        let s = c
            .summary
            .as_ref()
            .ok_or_else(|| ApiError::internal("no summary"))?;
        let head = json!({"model": name, "created_at": now_rfc3339()});
        let (text, calls) = match held.as_mut() {
            Some(ts) => {
                let mut text = ts.push(&c.text);
                let (tail, calls) = ts.finish();
                text.push_str(&tail);
                (text, calls)
            }
            None => (c.text.clone(), Vec::new()),
        };
        let mut v = merge(merge(head, wrap(&text)), final_fields(s));
        add_calls(&mut v, &calls);
        return Ok(Json(v).into_response());
    }
    // The closure owns the lease: the model stays loaded until the stream ends.
    let f = move |ev: Option<(usize, Event)>| -> (Vec<String>, bool) {
        let _hold = &m;
        let head = json!({"model": name, "created_at": now_rfc3339()});
        match ev {
            None => (vec![], true),
            Some((_, Event::Started { .. })) => (vec![], false),
            Some((_, Event::Delta { text, .. })) => {
                let text = match held.as_mut() {
                    Some(ts) => ts.push(&text),
                    None => text,
                };
                if text.is_empty() {
                    return (vec![], false);
                }
                let mut v = merge(head, wrap(&text));
                v["done"] = json!(false);
                (vec![v.to_string()], false)
            }
            Some((_, Event::Done(s))) => {
                let mut out = Vec::new();
                let (tail, calls) = held.as_mut().map(ToolStream::finish).unwrap_or_default();
                if !tail.is_empty() || !calls.is_empty() {
                    // Ollama sends calls in a message of their own before the final frame.
                    let mut v = merge(head.clone(), wrap(&tail));
                    v["done"] = json!(false);
                    add_calls(&mut v, &calls);
                    out.push(v.to_string());
                }
                out.push(merge(merge(head, wrap("")), final_fields(&s)).to_string());
                (out, true)
            }
            Some((_, Event::Failed(e))) => (
                vec![json!({"error": generate::failure(e).message}).to_string()],
                true,
            ),
        }
    };
    Ok(ndjson(frames(rx, f)))
}

/// Puts tool calls into a chat frame's message.
fn add_calls(v: &mut Value, calls: &[ToolCall]) {
    if !calls.is_empty() {
        if let Some(msg) = v.get_mut("message") {
            msg["tool_calls"] = calls.iter().map(ToolCall::ollama).collect();
        }
    }
}

fn chat_wrap(text: &str) -> Value {
    json!({"message": {"role": "assistant", "content": text}})
}

fn generate_wrap(text: &str) -> Value {
    json!({"response": text})
}

/// `POST /api/chat/ollama` (and `/api/chat` with an Ollama-shaped body).
pub async fn chat_route(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let b: Value = parse(body)?;
    chat_value(st, b).await
}

/// The Ollama chat, from an already-parsed body.
pub async fn chat_value(st: Shared, b: Value) -> Res {
    let b: ChatBody = serde_json::from_value(b)
        .map_err(|e| ApiError::invalid(format!("invalid request: {e}")))?;
    if b.messages.as_ref().is_some_and(Vec::is_empty) {
        // Ollama answers an empty conversation by loading (or, keep_alive 0, unloading).
        return load_or_unload(&st, b.model.as_deref(), b.keep_alive.as_ref(), chat_wrap).await;
    }
    let m = st
        .lease_named(b.model.as_deref(), b.keep_alive.as_ref())
        .await?;
    let tools = match b.tools.as_ref().filter(|t| !t.is_empty()) {
        Some(t) => Some((t.clone(), super::tools::check_tools(t)?)),
        None => None,
    };
    let msgs = b
        .messages
        .ok_or_else(|| ApiError::invalid("messages is required"))?;
    if msgs
        .iter()
        .any(|m| m.images.as_ref().is_some_and(|i| !i.is_empty()))
    {
        return Err(ApiError::invalid("images are not supported: the model is text-only").into());
    }
    let messages: Vec<Message> = msgs.into_iter().map(OllamaMessage::into_message).collect();
    let prompt = generate::chat_prompt(&m, &messages, tools.as_ref().map(|t| t.0.as_slice()), "")?;
    let req = request(&st, &m, prompt, b.options, b.format.as_ref())?;
    let names = tools.map(|t| t.1);
    respond(m, req, b.stream.unwrap_or(true), chat_wrap, names).await
}

/// Ollama's empty request: load the model (keep it per `keep_alive`), or with `keep_alive: 0`
/// unload it; answers with one final frame whose `done_reason` is `load` or `unload`.
async fn load_or_unload(
    st: &AppState,
    model: Option<&str>,
    keep_alive: Option<&Value>,
    wrap: fn(&str) -> Value,
) -> Res {
    let name = model
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("model is required"))?;
    let ka = keep_alive
        .filter(|v| !v.is_null())
        .map(crate::registry::KeepAlive::from_json)
        .transpose()?;
    let (name, reason) = if ka.is_some_and(|k| k.is_zero()) {
        let r = st.registry.with_catalog(|c| c.resolve(name))?;
        st.registry.unload(name)?;
        (r.name, "unload")
    } else {
        let lease = st.lease(Some(name), keep_alive).await?;
        (lease.name.clone(), "load")
    };
    let mut v = json!({"model": crate::registry::names::tagged(&name),
                       "created_at": now_rfc3339(), "done": true, "done_reason": reason});
    if let Value::Object(extra) = wrap("") {
        if let Some(o) = v.as_object_mut() {
            o.extend(extra);
        }
    }
    Ok(Json(v).into_response())
}

async fn generate_route(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let b: GenerateBody = parse(body)?;
    super::structured::ollama_format(b.format.as_ref())?;
    if b.prompt.as_deref().unwrap_or_default().is_empty() {
        return load_or_unload(
            &st,
            b.model.as_deref(),
            b.keep_alive.as_ref(),
            generate_wrap,
        )
        .await;
    }
    if b.images.as_ref().is_some_and(|i| !i.is_empty()) {
        return Err(ApiError::invalid("images are not supported: the model is text-only").into());
    }
    if b.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::invalid(
            "suffix (fill-in-the-middle) is not supported by this server",
        )
        .into());
    }
    let m = st
        .lease_named(b.model.as_deref(), b.keep_alive.as_ref())
        .await?;
    let text = b.prompt.unwrap_or_default();
    let prompt = if b.raw || m.template().is_none() {
        generate::text_prompt(&m, &text)
    } else {
        let mut messages = Vec::new();
        if let Some(s) = b.system {
            messages.push(Message::system(s));
        }
        messages.push(Message::user(text));
        generate::chat_prompt(&m, &messages, None, "")?
    };
    let req = request(&st, &m, prompt, b.options, b.format.as_ref())?;
    respond(m, req, b.stream.unwrap_or(true), generate_wrap, None).await
}

async fn version() -> Response {
    Json(json!({"version": env!("CARGO_PKG_VERSION")})).into_response()
}
