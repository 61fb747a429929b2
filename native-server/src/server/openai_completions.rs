//! OpenAI legacy completions (`POST /v1/completions`): a raw prompt, `echo`, integer
//! `logprobs`; `suffix` (fill-in-the-middle) is refused with a clear 400.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use weft_core::scheduler::{Event, Summary, TokenInfo};

use super::body::{frames, parse, sse};
use super::error::{ApiError, OpenAiError};
use super::generate::{self, collect};
use super::openai::{
    chunk_writer, end_choice, fingerprint, finish_reason, stream_error, usage, uuid_like, Common,
};
use super::state::{AppState, Shared};
use crate::registry::Loaded;

#[derive(Debug, Deserialize)]
struct CompletionBody {
    prompt: Option<Value>,
    #[serde(flatten)]
    common: Common,
    echo: Option<bool>,
    logprobs: Option<i64>,
    suffix: Option<String>,
    best_of: Option<i64>,
}

/// The prompt as text and ids: a string, a one-string array, or an array of token ids.
fn prompt_of(m: &Loaded, p: Option<&Value>) -> Result<(String, Vec<u32>), ApiError> {
    let bad = || {
        ApiError::invalid(
            "prompt must be a string, a one-element array of strings, or an array of token ids",
        )
    };
    let text_ids = |s: &str| (s.to_string(), generate::text_prompt(m, s));
    match p {
        None => Err(ApiError::invalid("prompt is required")),
        Some(Value::String(s)) => Ok(text_ids(s)),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
            Ok(text_ids(a[0].as_str().unwrap_or_default()))
        }
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_u64) => {
            let vocab = m.tokenizer.vocab_size() as u64;
            let mut ids = Vec::with_capacity(a.len());
            for v in a {
                let id = v.as_u64().unwrap_or(u64::MAX);
                if id >= vocab {
                    return Err(ApiError::invalid(format!(
                        "prompt token {id} is outside the vocabulary of {vocab}"
                    )));
                }
                ids.push(id as u32);
            }
            Ok((m.tokenizer.decode(&ids, true), ids))
        }
        Some(Value::Array(a)) if a.len() > 1 && a.iter().all(Value::is_string) => Err(
            ApiError::invalid("batched prompts are not supported: send one prompt per request"),
        ),
        Some(_) => Err(bad()),
    }
}

/// Legacy logprobs: tokens, their logprobs, top alternatives as maps, text offsets.
fn legacy_logprobs(m: &Loaded, tokens: &[TokenInfo], start_offset: usize) -> Value {
    let mut offset = start_offset;
    let (mut toks, mut lps, mut tops, mut offs) = (vec![], vec![], vec![], vec![]);
    for t in tokens {
        let (text, _) = generate::token_text(m, t.id);
        offs.push(offset);
        offset += text.len();
        toks.push(text);
        lps.push(t.logprob.unwrap_or(0.0));
        let mut top = Map::new();
        for &(id, lp) in &t.top {
            top.insert(generate::token_text(m, id).0, json!(lp));
        }
        tops.push(Value::Object(top));
    }
    json!({"tokens": toks, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offs})
}

/// `POST /v1/completions`.
pub async fn completions(
    State(st): State<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OpenAiError> {
    let b: CompletionBody = parse(body)?;
    let m = st.lease_named(b.common.model.as_deref(), None).await?;
    if b.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::invalid(
            "suffix (fill-in-the-middle) is not supported by this server",
        )
        .into());
    }
    if b.best_of.is_some_and(|n| Some(n) != b.common.n && n != 1) {
        return Err(ApiError::invalid("best_of is not supported (use n)").into());
    }
    let lp = match b.logprobs {
        None => None,
        Some(n) if (0..=5).contains(&n) => Some(n as usize),
        Some(n) => {
            return Err(
                ApiError::invalid(format!("logprobs must be between 0 and 5, got {n}")).into(),
            )
        }
    };
    let (text, ids) = prompt_of(&m, b.prompt.as_ref())?;
    let req = b.common.to_request(&st, &m, ids, lp)?;
    let n = req.n;
    let echo = if b.echo.unwrap_or(false) {
        text
    } else {
        String::new()
    };
    let rx = generate::start(&m, req)?;
    let id = format!("cmpl-{}", uuid_like());
    let created = AppState::now_unix();
    let name = m.name.clone();
    if b.common.stream.unwrap_or(false) {
        let include_usage = b.common.include_usage();
        let fp = fingerprint(&st);
        let mut sums: Vec<Option<Summary>> = vec![None; n];
        let mut offsets = vec![echo.len(); n];
        let chunk = chunk_writer("text_completion", id, created, name, fp);
        // The closure owns the lease: the model stays loaded until the stream ends.
        let f = move |ev: Option<(usize, Event)>| -> (Vec<String>, bool) {
            let m: &Loaded = &m;
            match ev {
                None => (vec![], true),
                Some((i, Event::Started { .. })) if !echo.is_empty() => (
                    vec![chunk(
                        json!([{"index": i, "text": echo, "logprobs": null, "finish_reason": null}]),
                        None,
                    )],
                    false,
                ),
                Some((_, Event::Started { .. })) => (vec![], false),
                Some((i, Event::Delta { text, tokens })) => {
                    if text.is_empty() && (lp.is_none() || tokens.is_empty()) {
                        return (vec![], false);
                    }
                    let l = match lp {
                        Some(_) => legacy_logprobs(m, &tokens, offsets[i]),
                        None => Value::Null,
                    };
                    offsets[i] += text.len();
                    (
                        vec![chunk(
                            json!([{"index": i, "text": text, "logprobs": l, "finish_reason": null}]),
                            None,
                        )],
                        false,
                    )
                }
                Some((i, Event::Done(s))) => {
                    let mut out = vec![chunk(
                        json!([{"index": i, "text": "", "logprobs": null, "finish_reason": finish_reason(&s)}]),
                        None,
                    )];
                    let ended = end_choice(&mut sums, i, s, include_usage, &chunk, &mut out);
                    (out, ended)
                }
                Some((_, Event::Failed(e))) => (vec![stream_error(e)], true),
            }
        };
        return Ok(sse(frames(rx, f)));
    }
    let out = collect(rx, n).await?;
    let sums: Vec<&Summary> = out.iter().filter_map(|c| c.summary.as_ref()).collect();
    let choices: Vec<Value> = out
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"index": i, "text": format!("{echo}{}", c.text),
                   "logprobs": lp.map(|_| legacy_logprobs(&m, &c.tokens, echo.len())),
                   "finish_reason": c.summary.as_ref().map(finish_reason)})
        })
        .collect();
    Ok(Json(json!({"id": id, "object": "text_completion", "created": created, "model": name,
                   "system_fingerprint": fingerprint(&st), "choices": choices, "usage": usage(&sums)}))
    .into_response())
}
