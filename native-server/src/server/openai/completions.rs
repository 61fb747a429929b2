//! OpenAI legacy completions (`POST /v1/completions`): a raw prompt, `echo`, integer
//! `logprobs`; `suffix` (fill-in-the-middle) is refused with a clear 400.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{Map, Value};
use weft_core::scheduler::{Event, Summary, TokenInfo};

use super::respond::{end_choice, stream_error, usage, Head};
use super::types::{Completion, CompletionChoice, CompletionRequest, LegacyLogprobs, Usage};
use super::Res;
use crate::registry::Loaded;
use crate::server::auth::context::RequestCtx;
use crate::server::error::{ApiError, OpenAiErrorBody};
use crate::server::extract::OpenAiJson;
use crate::server::generate::finish_reason;
use crate::server::generate::{self, collect};
use crate::server::leased::Leased;
use crate::server::openai::OpenAiState;
use crate::server::stream::{frames, json_frame, sse};

/// The prompt as text and ids: a string, a one-string array, or an array of token ids.
fn prompt_of(m: &Leased, p: Option<&Value>) -> Result<(String, Vec<u32>), ApiError> {
    let bad = || {
        ApiError::invalid(
            "prompt must be a string, a one-element array of strings, or an array of token ids",
        )
    };
    let text_ids = |s: &str| Ok((s.to_string(), generate::text_prompt(m, s)?));
    match p {
        None => Err(ApiError::invalid("prompt is required")),
        Some(Value::String(s)) => text_ids(s),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
            text_ids(a[0].as_str().unwrap_or_default())
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
            // Token ids are moderated as the text they stand for.
            let text = m.tokenizer.decode(&ids, true);
            crate::server::moderation::check_text(m.ctx(), &text)?;
            Ok((text, ids))
        }
        Some(Value::Array(a)) if a.len() > 1 && a.iter().all(Value::is_string) => Err(
            ApiError::invalid("batched prompts are not supported: send one prompt per request"),
        ),
        Some(_) => Err(bad()),
    }
}

/// Legacy logprobs: tokens, their logprobs, top alternatives as maps, text offsets.
fn legacy_logprobs(m: &Loaded, tokens: &[TokenInfo], start_offset: usize) -> LegacyLogprobs {
    let mut offset = start_offset;
    let mut out = LegacyLogprobs {
        tokens: vec![],
        token_logprobs: vec![],
        top_logprobs: vec![],
        text_offset: vec![],
    };
    for t in tokens {
        let (text, _) = generate::token_text(m, t.id);
        out.text_offset.push(offset);
        offset += text.len();
        out.tokens.push(text);
        out.token_logprobs.push(t.logprob.unwrap_or(0.0));
        let mut top = Map::new();
        for &(id, lp) in &t.top {
            top.insert(generate::token_text(m, id).0, Value::from(lp));
        }
        out.top_logprobs.push(top);
    }
    out
}

#[utoipa::path(post, path = "/completions", tag = "openai", request_body = CompletionRequest,
    responses(
        (status = 200, description = "A completion, or SSE chunks when stream is true",
         content((Completion = "application/json"), (Completion = "text/event-stream"))),
        (status = 400, body = OpenAiErrorBody), (status = 404, body = OpenAiErrorBody)))]
pub async fn completions(
    State(st): State<OpenAiState>,
    ctx: RequestCtx,
    OpenAiJson(b): OpenAiJson<CompletionRequest>,
) -> Res {
    let m = st
        .inference
        .lease_named(&ctx, b.common.model.as_deref(), None)
        .await?;
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
    let req = b.common.to_request(&st.inference, &m, ids, lp)?;
    let n = req.n;
    let echo = if b.echo.unwrap_or(false) {
        text
    } else {
        String::new()
    };
    let rx = generate::start(&m, req)?;
    let head = Head::new(&st, "cmpl", &m.name);
    if b.common.stream.unwrap_or(false) {
        let include_usage = b.common.include_usage();
        return Ok(stream(m, rx, n, head, echo, lp, include_usage));
    }
    let out = collect(rx, n).await?;
    let sums: Vec<&Summary> = out.iter().filter_map(|c| c.summary.as_ref()).collect();
    let choices = out
        .iter()
        .enumerate()
        .map(|(i, c)| CompletionChoice {
            index: i,
            text: format!("{echo}{}", c.text),
            logprobs: lp.map(|_| legacy_logprobs(&m, &c.tokens, echo.len())),
            finish_reason: c.summary.as_ref().map(finish_reason),
        })
        .collect();
    Ok(Json(completion(&head, choices, Some(usage(&sums)))).into_response())
}

fn completion(h: &Head, choices: Vec<CompletionChoice>, usage: Option<Usage>) -> Completion {
    Completion {
        id: h.id.clone(),
        object: "text_completion",
        created: h.created,
        model: h.model.clone(),
        system_fingerprint: h.fingerprint.clone(),
        choices,
        usage,
    }
}

/// The SSE response; the closure owns the lease, so the model stays loaded until the stream
/// ends.
fn stream(
    m: Leased,
    rx: generate::EventStream,
    n: usize,
    head: Head,
    echo: String,
    lp: Option<usize>,
    include_usage: bool,
) -> Response {
    let mut sums: Vec<Option<Summary>> = vec![None; n];
    let mut offsets = vec![echo.len(); n];
    let head2 = head.clone();
    let chunk = move |index: usize, text: String, logprobs, finish| {
        let choice = CompletionChoice {
            index,
            text,
            logprobs,
            finish_reason: finish,
        };
        json_frame(&completion(&head, vec![choice], None))
    };
    let f = move |ev: Option<(usize, Event)>| -> (Vec<String>, bool) {
        let m: &Loaded = &m;
        match ev {
            None => (vec![], true),
            Some((i, Event::Started { .. })) if !echo.is_empty() => {
                (vec![chunk(i, echo.clone(), None, None)], false)
            }
            Some((_, Event::Started { .. } | Event::Queued { .. })) => (vec![], false),
            Some((i, Event::Delta { text, tokens })) => {
                if text.is_empty() && (lp.is_none() || tokens.is_empty()) {
                    return (vec![], false);
                }
                let l = lp.map(|_| legacy_logprobs(m, &tokens, offsets[i]));
                offsets[i] += text.len();
                (vec![chunk(i, text, l, None)], false)
            }
            Some((i, Event::Done(s))) => {
                let finish = finish_reason(&s);
                let Some(total) = end_choice(&mut sums, i, s) else {
                    return (vec![chunk(i, String::new(), None, Some(finish))], false);
                };
                // The last finish chunk carries the usage of all choices.
                let choice = CompletionChoice {
                    index: i,
                    text: String::new(),
                    logprobs: None,
                    finish_reason: Some(finish),
                };
                let mut out = vec![json_frame(&completion(
                    &head2,
                    vec![choice],
                    Some(total.clone()),
                ))];
                if include_usage {
                    out.push(json_frame(&completion(&head2, vec![], Some(total))));
                }
                out.push("[DONE]".into());
                (out, true)
            }
            Some((_, Event::Failed(e))) => (vec![stream_error(e)], true),
        }
    };
    sse(frames(rx, f))
}
