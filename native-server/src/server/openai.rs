//! The OpenAI surface (`/v1`): chat completions, models, tokenize/detokenize, metrics, and a
//! 501 for every other `/v1` path. Completions live in `openai_completions.rs`.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use weft_core::chat::Message;
use weft_core::scheduler::{Event, Finish, Summary, TokenInfo};

use super::body::{frames, parse, sse, OneOrMany};
use super::error::{ApiError, OpenAiError};
use super::generate::{self, collect, GenRequest};
use super::sampling::{resolve, SamplingFields};
use super::state::{unix, AppState, Shared};
use super::tool_choice::{self, ForcedCall, ToolChoice};
use super::tools::ToolStream;
use crate::registry::{Lease, Loaded};

type Res = Result<Response, OpenAiError>;

/// Routes under `/v1`.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route("/v1/chat/completions", post(chat))
        .route(
            "/v1/completions",
            post(super::openai_completions::completions),
        )
        .route("/v1/tokenize", post(tokenize))
        .route("/v1/detokenize", post(detokenize))
        .route("/v1/metrics", get(super::ops::metrics_json))
        .route("/v1/{*rest}", any(not_implemented))
}

async fn not_implemented(Path(rest): Path<String>) -> Response {
    ApiError::not_implemented(format!("/v1/{rest} is not implemented by this server")).openai()
}

fn model_object(name: &str, created: std::time::SystemTime) -> Value {
    json!({"id": name, "object": "model", "created": unix(created), "owned_by": "weft"})
}

/// Every model the server knows (loaded or not).
async fn models(State(st): State<Shared>) -> Response {
    let data: Vec<Value> = st.registry.with_catalog(|c| {
        c.names()
            .iter()
            .filter_map(|n| c.resolve(n).ok().map(|r| model_object(n, r.facts.modified)))
            .collect()
    });
    Json(json!({"object": "list", "data": data})).into_response()
}

async fn model(State(st): State<Shared>, Path(id): Path<String>) -> Res {
    let r = st.registry.with_catalog(|c| c.resolve(&id))?;
    Ok(Json(model_object(&r.name, r.facts.modified)).into_response())
}

/// Ollama-style `options` accepted on `/v1` too (top-level OpenAI fields win over them).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Options {
    pub num_predict: Option<i64>,
    pub num_ctx: Option<i64>,
    pub temperature: Option<f32>,
    pub top_k: Option<i64>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub repeat_last_n: Option<i64>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub seed: Option<i64>,
    pub stop: Option<OneOrMany>,
}

impl Options {
    /// The default options a model name carries (`/api/create` `parameters`).
    pub fn of_model(m: &Lease) -> Options {
        serde_json::from_value(Value::Object(m.overrides.parameters.clone())).unwrap_or_default()
    }

    /// `self`, with `defaults` filling the fields it leaves unset.
    pub fn or(self, d: Options) -> Options {
        Options {
            num_predict: self.num_predict.or(d.num_predict),
            num_ctx: self.num_ctx.or(d.num_ctx),
            temperature: self.temperature.or(d.temperature),
            top_k: self.top_k.or(d.top_k),
            top_p: self.top_p.or(d.top_p),
            min_p: self.min_p.or(d.min_p),
            repeat_penalty: self.repeat_penalty.or(d.repeat_penalty),
            repeat_last_n: self.repeat_last_n.or(d.repeat_last_n),
            presence_penalty: self.presence_penalty.or(d.presence_penalty),
            frequency_penalty: self.frequency_penalty.or(d.frequency_penalty),
            seed: self.seed.or(d.seed),
            stop: self.stop.or(d.stop),
        }
    }

    pub fn sampling(&self) -> SamplingFields {
        SamplingFields {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            repeat_last_n: self.repeat_last_n,
            seed: self.seed,
        }
    }
}

/// Fields chat and completions share.
#[derive(Debug, Default, Deserialize)]
pub struct Common {
    pub model: Option<String>,
    #[serde(default)]
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub max_tokens: Option<i64>,
    pub max_completion_tokens: Option<i64>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub seed: Option<i64>,
    pub stop: Option<OneOrMany>,
    pub logit_bias: Option<BTreeMap<String, f32>>,
    pub n: Option<i64>,
    /// Accepted (OpenAI end-user id) and not used.
    #[allow(dead_code)]
    pub user: Option<String>,
    pub options: Option<Options>,
    /// Extension (as vLLM): keep generating past end-of-generation tokens.
    pub ignore_eos: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

impl Common {
    /// Checks the model and builds the internal request for `prompt`.
    pub fn to_request(
        &self,
        st: &AppState,
        m: &Lease,
        prompt: Vec<u32>,
        logprobs: Option<usize>,
    ) -> Result<GenRequest, ApiError> {
        let opts = self
            .options
            .clone()
            .unwrap_or_default()
            .or(Options::of_model(m));
        let top = SamplingFields {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            repeat_last_n: None,
            seed: self.seed,
        }
        .or(&opts.sampling());
        let bias = logit_bias(m, self.logit_bias.as_ref())?;
        let sampling = resolve(&top, &st.cfg.sampling, st.cfg.precedence, bias)?;
        let requested = self
            .max_tokens
            .or(self.max_completion_tokens)
            .or(opts.num_predict);
        let max_tokens = generate::max_tokens(st, prompt.len(), requested)?;
        let stop = self
            .stop
            .clone()
            .or(opts.stop)
            .map(OneOrMany::into_vec)
            .unwrap_or_default();
        if stop.len() > 16 {
            return Err(ApiError::invalid("at most 16 stop sequences are accepted"));
        }
        let n = self.n.unwrap_or(1);
        if !(1..=16).contains(&n) {
            return Err(ApiError::invalid(format!(
                "n must be between 1 and 16, got {n}"
            )));
        }
        Ok(GenRequest {
            prompt,
            sampling,
            max_tokens,
            stop,
            logprobs,
            n: n as usize,
            ignore_eos: self.ignore_eos.unwrap_or(false),
            json: None,
        })
    }

    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }
}

/// OpenAI `logit_bias` (token id strings → -100..100; -100 bans the token).
fn logit_bias(
    m: &Loaded,
    b: Option<&BTreeMap<String, f32>>,
) -> Result<BTreeMap<u32, f32>, ApiError> {
    let mut out = BTreeMap::new();
    for (k, &v) in b.into_iter().flatten() {
        let id: u32 = k
            .parse()
            .map_err(|_| ApiError::invalid(format!("logit_bias key {k:?} is not a token id")))?;
        if id as usize >= m.tokenizer.vocab_size() {
            return Err(ApiError::invalid(format!(
                "logit_bias token {id} is outside the vocabulary"
            )));
        }
        if !(-100.0..=100.0).contains(&v) {
            return Err(ApiError::invalid(format!(
                "logit_bias values must be in [-100, 100], got {v}"
            )));
        }
        out.insert(id, if v <= -100.0 { f32::NEG_INFINITY } else { v });
    }
    Ok(out)
}

#[derive(Debug, Deserialize)]
struct ChatBody {
    messages: Option<Vec<Message>>,
    #[serde(flatten)]
    common: Common,
    logprobs: Option<bool>,
    top_logprobs: Option<i64>,
    tools: Option<Vec<Value>>,
    tool_choice: Option<Value>,
    /// Accepted; the model decides how many calls it makes.
    #[allow(dead_code)]
    parallel_tool_calls: Option<bool>,
    response_format: Option<Value>,
}

/// The tools a chat request offers the model.
struct Offered {
    /// Definitions as sent (for the chat template).
    defs: Vec<Value>,
    names: Vec<String>,
    /// `tool_choice` "required" or a named function: the call the reply must be.
    forced: Option<ForcedCall>,
}

/// The tools to offer the model (`tool_choice` "none" offers none), and the call to force.
fn offered_tools(b: &ChatBody, m: &Lease) -> Result<Option<Offered>, ApiError> {
    let choice = tool_choice::parse(b.tool_choice.as_ref())?;
    let defs = b.tools.clone().unwrap_or_default();
    let names = super::tools::check_tools(&defs)?;
    let template = m.template().map_or("", |t| t.source());
    let forced = tool_choice::forced_call(&choice, &defs, &names, template)?;
    if defs.is_empty() || choice == ToolChoice::None {
        return Ok(None);
    }
    Ok(Some(Offered {
        defs,
        names,
        forced,
    }))
}

/// `finish_reason` for a summary (a cancelled request never reaches a client).
pub fn finish_reason(s: &Summary) -> &'static str {
    match s.finish {
        Finish::Length => "length",
        Finish::Stop | Finish::Cancelled => "stop",
    }
}

/// `finish_reason`, "tool_calls" when the reply ended normally with calls.
fn finish_with_calls(s: &Summary, calls: bool) -> &'static str {
    match finish_reason(s) {
        "stop" if calls => "tool_calls",
        r => r,
    }
}

/// `usage` over all choices.
/// Builds the streamed chunks of one response: `object` names the kind of chunk, `choices`
/// and an optional `usage` fill each.
pub fn chunk_writer(
    object: &'static str,
    id: String,
    created: u64,
    name: String,
    fp: String,
) -> impl Fn(Value, Option<Value>) -> String {
    move |choices: Value, usage: Option<Value>| {
        let mut c = json!({"id": id, "object": object, "created": created,
                           "model": name, "system_fingerprint": fp, "choices": choices});
        if let Some(u) = usage {
            c["usage"] = u;
        }
        c.to_string()
    }
}

/// Records that choice `i` ended. When every choice has, appends the usage chunk (if asked)
/// and `[DONE]` to `out` and returns true: the stream is over.
pub fn end_choice(
    sums: &mut [Option<Summary>],
    i: usize,
    s: Summary,
    include_usage: bool,
    chunk: &impl Fn(Value, Option<Value>) -> String,
    out: &mut Vec<String>,
) -> bool {
    sums[i] = Some(s);
    if !sums.iter().all(Option::is_some) {
        return false;
    }
    if include_usage {
        let all: Vec<&Summary> = sums.iter().flatten().collect();
        out.push(chunk(json!([]), Some(usage(&all))));
    }
    out.push("[DONE]".into());
    true
}

/// The OpenAI-shaped error frame that ends a stream whose generation failed.
pub fn stream_error(message: String) -> String {
    let err = generate::failure(message);
    json!({"error": {"message": err.message, "type": err.kind, "code": err.code}}).to_string()
}

pub fn usage(sums: &[&Summary]) -> Value {
    let prompt = sums.first().map(|s| s.prompt_tokens).unwrap_or(0);
    let cached = sums.first().map(|s| s.cached_tokens).unwrap_or(0);
    let completion: usize = sums.iter().map(|s| s.completion_tokens).sum();
    json!({"prompt_tokens": prompt, "completion_tokens": completion,
           "total_tokens": prompt + completion,
           "prompt_tokens_details": {"cached_tokens": cached}})
}

/// Chat-style logprobs entries.
fn chat_logprobs(m: &Loaded, tokens: &[TokenInfo]) -> Value {
    let entry = |id: u32, lp: f32| {
        let (text, bytes) = generate::token_text(m, id);
        json!({"token": text, "logprob": lp, "bytes": bytes})
    };
    let content: Vec<Value> = tokens
        .iter()
        .map(|t| {
            let mut e = entry(t.id, t.logprob.unwrap_or(0.0));
            e["top_logprobs"] = t.top.iter().map(|&(id, lp)| entry(id, lp)).collect();
            e
        })
        .collect();
    json!({"content": content})
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

async fn chat(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let b: ChatBody = parse(body)?;
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
    let mut json = super::structured::response_format(b.response_format.as_ref())?;
    let m = st.lease_named(b.common.model.as_deref(), None).await?;
    let tools = offered_tools(&b, &m)?;
    // A forced call replaces `response_format`: the reply is the call, not text.
    let forced = tools.as_ref().and_then(|t| t.forced.as_ref());
    if let Some(f) = forced {
        json = Some(f.schema.clone());
    }
    let opening = forced.map_or("", |f| f.opening);
    let defs = tools.as_ref().map(|t| t.defs.as_slice());
    let prompt = generate::chat_prompt(&m, messages, defs, opening)?;
    let lp = top_logprobs(b.logprobs, b.top_logprobs)?;
    let mut req = b.common.to_request(&st, &m, prompt, lp)?;
    req.json = json;
    let names = tools.map(|t| t.names);
    let n = req.n;
    let rx = generate::start(&m, req)?;
    let id = format!("chatcmpl-{}", uuid_like());
    let created = AppState::now_unix();
    let name = m.name.clone();
    if b.common.stream.unwrap_or(false) {
        return Ok(chat_stream(
            &st,
            m,
            rx,
            n,
            id,
            created,
            name,
            b.common.include_usage(),
            lp.is_some(),
            names,
        ));
    }
    let out = collect(rx, n).await?;
    let sums: Vec<&Summary> = out.iter().filter_map(|c| c.summary.as_ref()).collect();
    let choices: Vec<Value> = out
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (content, calls) = match &names {
                Some(n) => {
                    let mut ts = ToolStream::new(n.clone());
                    let mut text = ts.push(&c.text);
                    let (tail, calls) = ts.finish();
                    text.push_str(&tail);
                    (text, calls)
                }
                None => (c.text.clone(), Vec::new()),
            };
            let mut message = json!({"role": "assistant", "content": content, "refusal": null});
            if !calls.is_empty() {
                if content.is_empty() {
                    message["content"] = Value::Null;
                }
                message["tool_calls"] =
                    calls.iter().map(|t| t.openai(None)).collect();
            }
            json!({"index": i, "message": message,
                   "logprobs": if lp.is_some() { chat_logprobs(&m, &c.tokens) } else { Value::Null },
                   "finish_reason": c.summary.as_ref().map(|s| finish_with_calls(s, !calls.is_empty()))})
        })
        .collect();
    Ok(Json(
        json!({"id": id, "object": "chat.completion", "created": created, "model": name,
                   "system_fingerprint": fingerprint(&st),
                   "choices": choices, "usage": usage(&sums)}),
    )
    .into_response())
}

#[allow(clippy::too_many_arguments)]
fn chat_stream(
    st: &AppState,
    m: Lease,
    rx: generate::EventStream,
    n: usize,
    id: String,
    created: u64,
    name: String,
    include_usage: bool,
    logprobs: bool,
    tools: Option<Vec<String>>,
) -> Response {
    let fp = fingerprint(st);
    let mut sums: Vec<Option<Summary>> = vec![None; n];
    // Per choice: holds back tool calls while streaming content.
    let mut held: Vec<Option<ToolStream>> =
        (0..n).map(|_| tools.clone().map(ToolStream::new)).collect();
    let chunk = chunk_writer("chat.completion.chunk", id, created, name, fp);
    // The closure owns the lease: the model stays loaded until the stream ends.
    let f = move |ev: Option<(usize, Event)>| -> (Vec<String>, bool) {
        let m: &Loaded = &m;
        match ev {
            None => (vec![], true),
            Some((i, Event::Started { .. })) => (
                vec![chunk(
                    json!([{"index": i, "delta": {"role": "assistant", "content": ""},
                                   "logprobs": null, "finish_reason": null}]),
                    None,
                )],
                false,
            ),
            Some((i, Event::Delta { text, tokens })) => {
                let text = match held[i].as_mut() {
                    Some(ts) => ts.push(&text),
                    None => text,
                };
                if text.is_empty() && (!logprobs || tokens.is_empty()) {
                    return (vec![], false);
                }
                let lp = if logprobs {
                    chat_logprobs(m, &tokens)
                } else {
                    Value::Null
                };
                (
                    vec![chunk(
                        json!([{"index": i, "delta": {"content": text},
                                       "logprobs": lp, "finish_reason": null}]),
                        None,
                    )],
                    false,
                )
            }
            Some((i, Event::Done(s))) => {
                let mut out = Vec::new();
                let (tail, calls) = held[i].as_mut().map(ToolStream::finish).unwrap_or_default();
                if !tail.is_empty() {
                    out.push(chunk(
                        json!([{"index": i, "delta": {"content": tail}, "logprobs": null,
                                "finish_reason": null}]),
                        None,
                    ));
                }
                if !calls.is_empty() {
                    let calls: Vec<Value> = calls
                        .iter()
                        .enumerate()
                        .map(|(k, t)| t.openai(Some(k)))
                        .collect();
                    out.push(chunk(
                        json!([{"index": i, "delta": {"tool_calls": calls}, "logprobs": null,
                                "finish_reason": null}]),
                        None,
                    ));
                }
                out.push(chunk(
                    json!([{"index": i, "delta": {}, "logprobs": null,
                            "finish_reason": finish_with_calls(&s, !calls.is_empty())}]),
                    None,
                ));
                let ended = end_choice(&mut sums, i, s, include_usage, &chunk, &mut out);
                (out, ended)
            }
            Some((_, Event::Failed(e))) => (vec![stream_error(e)], true),
        }
    };
    sse(frames(rx, f))
}

/// An identifier of the server build and model (OpenAI `system_fingerprint`).
pub fn fingerprint(st: &AppState) -> String {
    format!("weft-{}-{}", env!("CARGO_PKG_VERSION"), st.cfg.backend)
}

/// A random-looking id (time and a counter; ids only need to be unique per server).
pub fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!("{:x}{:04x}", t, N.fetch_add(1, Ordering::Relaxed) & 0xffff)
}

#[derive(Deserialize)]
struct TokenizeBody {
    #[serde(alias = "prompt", alias = "text")]
    content: String,
    #[serde(default = "yes")]
    add_special: bool,
    model: Option<String>,
}

fn yes() -> bool {
    true
}

async fn tokenize(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let b: TokenizeBody = parse(body)?;
    let m = st.lease(b.model.as_deref(), None).await?;
    let tokens = m.tokenizer.encode(&b.content, b.add_special, true);
    Ok(
        Json(json!({"tokens": tokens, "count": tokens.len(), "max_model_len": st.cfg.n_ctx}))
            .into_response(),
    )
}

#[derive(Deserialize)]
struct DetokenizeBody {
    tokens: Vec<i64>,
    model: Option<String>,
}

async fn detokenize(State(st): State<Shared>, body: Result<Bytes, BytesRejection>) -> Res {
    let b: DetokenizeBody = parse(body)?;
    let m = st.lease(b.model.as_deref(), None).await?;
    let vocab = m.tokenizer.vocab_size();
    let mut ids = Vec::with_capacity(b.tokens.len());
    for &t in &b.tokens {
        if t < 0 || t as usize >= vocab {
            return Err(ApiError::invalid(format!(
                "token {t} is outside the vocabulary of {vocab}"
            ))
            .into());
        }
        ids.push(t as u32);
    }
    let text = m.tokenizer.decode(&ids, true);
    Ok(Json(json!({"prompt": text, "content": text})).into_response())
}
