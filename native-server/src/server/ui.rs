//! The chat-UI protocol: sessions and an SSE chat stream with `token` / `thinking` frames and
//! a terminal `done` frame (tokenCount, elapsed, tokPerSec, promptTokens, kvReusedTokens,
//! kvReusePercent).
//!
//! It is served at `/api/ui/chat`, and at `/api/chat` when the body has this protocol's shape.
//! **Rule:** a `/api/chat` body without a `model` field that has at least one of `sessionId`,
//! `maxTokens` or `newChat` is a chat-UI request; every other body is an Ollama chat request
//! (Ollama clients always send `model`).
//!
//! A session tracks its conversation: a request may send only the new turn (it is appended to
//! the tracked history) or the whole conversation (used as is when it starts with the tracked
//! history). The prefix cache then reuses the previous turn's tokens.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use weft_core::chat::Message;
use weft_core::scheduler::{Event, Finish};

use super::body::{frames, parse, sse};
use super::error::{ApiError, PlainError};
use super::generate::{self, GenRequest};
use super::sampling::{resolve, SamplingFields};
use super::state::Shared;
use super::think::ThinkSplitter;

type Res = Result<Response, PlainError>;

const DEFAULT_SESSION: &str = "__default__";

/// Chat-UI routes, plus `/api/chat` (shared with Ollama by the rule above).
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/api/chat", post(dispatch))
        .route("/api/ui/chat", post(ui_chat))
        .route("/api/sessions", post(new_session))
        .route("/api/sessions/{id}", delete(delete_session))
        .route("/api/models", get(models))
        .route("/api/queue/status", get(queue_status))
}

/// Whether a `/api/chat` body is a chat-UI request.
pub fn is_ui_body(v: &Value) -> bool {
    v.get("model").is_none()
        && ["sessionId", "maxTokens", "newChat"]
            .iter()
            .any(|k| v.get(k).is_some())
}

async fn dispatch(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let v: Value = parse(body)?;
    if is_ui_body(&v) {
        chat_value(st, v).await
    } else {
        super::ollama::chat_value(st, v).await
    }
}

async fn ui_chat(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let v: Value = parse(body)?;
    chat_value(st, v).await
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UiBody {
    /// Which served model (the default one when absent; see `/api/models`).
    #[serde(alias = "modelName")]
    model: Option<String>,
    messages: Option<Vec<Message>>,
    max_tokens: Option<i64>,
    session_id: Option<String>,
    #[serde(default)]
    new_chat: bool,
    #[allow(dead_code)]
    think: Option<bool>,
    tools: Option<Vec<Value>>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<i64>,
    min_p: Option<f32>,
    repeat_penalty: Option<f32>,
    seed: Option<i64>,
}

fn same(a: &Message, b: &Message) -> bool {
    a.role == b.role && a.content == b.content
}

async fn chat_value(st: Shared, v: Value) -> Res {
    let b: UiBody = serde_json::from_value(v)
        .map_err(|e| ApiError::invalid(format!("invalid request: {e}")))?;
    let m = st.lease(b.model.as_deref(), None).await?;
    if b.tools.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err(ApiError::invalid("tools are not supported by this server yet").into());
    }
    let sid = b
        .session_id
        .clone()
        .unwrap_or_else(|| DEFAULT_SESSION.into());
    let new = b.messages.unwrap_or_default();
    if new.is_empty() {
        return Err(ApiError::invalid("messages must not be empty").into());
    }
    let conversation = {
        let mut sessions = st.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if sid != DEFAULT_SESSION && !sessions.contains_key(&sid) {
            return Err(ApiError::not_found(format!(
                "unknown session {sid:?}; create one with POST /api/sessions"
            ))
            .into());
        }
        let hist = sessions.entry(sid.clone()).or_default();
        if b.new_chat {
            hist.clear();
        }
        let starts_with_hist =
            new.len() >= hist.len() && hist.iter().zip(&new).all(|(a, b)| same(a, b));
        if starts_with_hist {
            new
        } else {
            hist.iter().cloned().chain(new).collect()
        }
    };
    let prompt = generate::chat_prompt(&m, &conversation, None, "")?;
    let req_sampling = SamplingFields {
        temperature: b.temperature,
        top_k: b.top_k,
        top_p: b.top_p,
        min_p: b.min_p,
        repeat_penalty: b.repeat_penalty,
        seed: b.seed,
        ..Default::default()
    };
    let sampling = resolve(
        &req_sampling,
        &st.cfg.sampling,
        st.cfg.precedence,
        Default::default(),
    )?;
    let max_tokens = generate::max_tokens(&st, prompt.len(), b.max_tokens)?;
    let rx = generate::start(
        &m,
        GenRequest {
            prompt,
            sampling,
            max_tokens,
            stop: vec![],
            logprobs: None,
            n: 1,
            ignore_eos: false,
            json: None,
        },
    )?;
    let started = std::time::Instant::now();
    let mut reply = String::new();
    let mut split = ThinkSplitter::default();
    let st2 = st.clone();
    // The closure owns the lease: the model stays loaded until the stream ends.
    let f = move |ev: Option<(usize, Event)>| -> (Vec<String>, bool) {
        let _hold = &m;
        match ev {
            None => (vec![], true),
            Some((_, Event::Started { .. })) => (vec![], false),
            Some((_, Event::Delta { text, .. })) => {
                let mut out = Vec::new();
                for (thinking, t) in split.push(&text) {
                    if thinking {
                        out.push(json!({"thinking": t}).to_string());
                    } else {
                        reply.push_str(&t);
                        out.push(json!({"token": t}).to_string());
                    }
                }
                (out, false)
            }
            Some((_, Event::Done(s))) => {
                let mut out = Vec::new();
                for (thinking, t) in split.finish() {
                    if thinking {
                        out.push(json!({"thinking": t}).to_string());
                    } else {
                        reply.push_str(&t);
                        out.push(json!({"token": t}).to_string());
                    }
                }
                let aborted = s.finish == Finish::Cancelled;
                if !aborted {
                    let mut sessions = st2.sessions.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(h) = sessions.get_mut(&sid) {
                        *h = conversation.clone();
                        h.push(Message::assistant(reply.clone()));
                    }
                }
                let pct = if s.prompt_tokens > 0 { 100.0 * s.cached_tokens as f64 / s.prompt_tokens as f64 } else { 0.0 };
                let tps = if s.gen_secs > 0.0 { s.completion_tokens as f64 / s.gen_secs } else { 0.0 };
                out.push(json!({"done": true, "tokenCount": s.completion_tokens,
                    "elapsed": round3(started.elapsed().as_secs_f64()), "tokPerSec": round3(tps),
                    "aborted": aborted, "error": null, "sessionId": sid, "promptTokens": s.prompt_tokens,
                    "kvReusedTokens": s.cached_tokens, "kvReusePercent": round3(pct),
                    "finishReason": super::openai::finish_reason(&s)}).to_string());
                (out, true)
            }
            Some((_, Event::Failed(e))) => (vec![json!({"done": true, "tokenCount": 0,
                "elapsed": round3(started.elapsed().as_secs_f64()), "tokPerSec": 0.0, "aborted": false,
                "error": e, "sessionId": sid, "promptTokens": 0, "kvReusedTokens": 0, "kvReusePercent": 0.0}).to_string()], true),
        }
    };
    Ok(sse(frames(rx, f)))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

async fn new_session(State(st): State<Shared>) -> Response {
    let id = super::openai::uuid_like();
    st.sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id.clone(), Vec::new());
    Json(json!({"sessionId": id})).into_response()
}

async fn delete_session(State(st): State<Shared>, Path(id): Path<String>) -> Res {
    if id == DEFAULT_SESSION {
        return Err(ApiError::invalid("the default session cannot be deleted").into());
    }
    match st
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id)
    {
        Some(_) => Ok(Json(json!({"ok": true, "sessionId": id})).into_response()),
        None => Err(ApiError::not_found(format!("unknown session {id:?}")).into()),
    }
}

/// The served models and settings, as the chat-UI protocol lists them: `model` is the
/// default, `models` every known name with whether it is loaded.
async fn models(State(st): State<Shared>) -> Response {
    let reg = &st.registry;
    let (default, list) = reg.with_catalog(|c| {
        let list: Vec<(String, Result<crate::registry::Resolved, ApiError>)> = c
            .names()
            .into_iter()
            .map(|n| {
                let r = c.resolve(&n);
                (n, r)
            })
            .collect();
        (c.default_name().map(str::to_string), list)
    });
    let models: Vec<Value> = list
        .iter()
        .map(|(n, r)| match r {
            Ok(r) => json!({"name": n, "file": r.facts.path.file_name().map(|f| f.to_string_lossy().into_owned()),
                            "architecture": r.facts.architecture, "loaded": reg.is_loaded(n),
                            "broken": null}),
            Err(e) => json!({"name": n, "file": null, "architecture": null, "loaded": false,
                             "broken": e.message}),
        })
        .collect();
    let def = list.iter().find(|(n, _)| Some(n) == default.as_ref());
    let facts = def
        .and_then(|(_, r)| r.as_ref().ok())
        .map(|r| r.facts.clone());
    Json(json!({
        "model": default,
        "file": facts.as_ref().and_then(|f| f.path.file_name().map(|x| x.to_string_lossy().into_owned())),
        "loaded": default.as_deref().is_some_and(|d| reg.is_loaded(d)),
        "backend": st.cfg.backend,
        "supportedBackends": ["cpu", "wgpu"],
        "architecture": facts.as_ref().map(|f| f.architecture.clone()),
        "contextLength": st.cfg.n_ctx,
        "defaultMaxTokens": st.cfg.max_tokens,
        "parallel": st.cfg.parallel,
        "projector": null,
        "video": null,
        "skills": null,
        "models": models,
    }))
    .into_response()
}

async fn queue_status(State(st): State<Shared>) -> Response {
    let t = st.registry.totals().counters;
    Json(
        json!({"pending_requests": t.waiting, "running_requests": t.running,
                "queue_capacity": st.cfg.queue, "parallel": st.cfg.parallel}),
    )
    .into_response()
}
