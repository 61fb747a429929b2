//! The streaming generation loop: prefix reuse, prefill, then sample → stream text → decode,
//! awaiting each step (GPU readback) and yielding to the event loop between tokens so a stop
//! request is seen.

use wasm_bindgen::prelude::*;
use weft_core::sampler::{Sampler, StopMatcher};
use weft_core::tokenizer::{StreamDecoder, Tokenizer};

use crate::js::{self, error};
use crate::options::GenOptions;
use crate::Loaded;

/// Text to ids with the tokenizer's own BOS rule; a BOS the template already wrote is not
/// doubled.
pub fn encode(tok: &Tokenizer, text: &str, parse_special: bool) -> Vec<u32> {
    let mut ids = tok.encode(text, true, parse_special);
    if let Some(bos) = tok.bos() {
        if ids.len() >= 2 && ids[0] == bos && ids[1] == bos {
            ids.remove(0);
        }
    }
    ids
}

/// Generates after `ids`, streaming text deltas to `on_text`. On error the cached sequence is
/// cleared (its state is unknown).
pub async fn run(
    l: &mut Loaded,
    ids: Vec<u32>,
    opts: &GenOptions,
    on_text: &js_sys::Function,
    signal: &JsValue,
) -> Result<JsValue, JsValue> {
    let r = run_inner(l, ids, opts, on_text, signal).await;
    if r.is_err() {
        let _ = l.engine.truncate(l.seq, 0);
        l.cached.clear();
    }
    r
}

async fn run_inner(
    l: &mut Loaded,
    ids: Vec<u32>,
    opts: &GenOptions,
    on_text: &js_sys::Function,
    signal: &JsValue,
) -> Result<JsValue, JsValue> {
    if ids.is_empty() {
        return Err(error("the prompt is empty"));
    }
    if ids.len() >= l.n_ctx {
        return Err(error(format!(
            "the prompt has {} tokens but the context holds {}; shorten the conversation",
            ids.len(),
            l.n_ctx
        )));
    }
    let mut cfg = opts.sampler();
    if cfg.seed.is_none() {
        cfg.seed = Some((js_sys::Math::random() * 9.007_199_254_740_991e15) as u64);
    }
    let mut sampler = Sampler::new(cfg).map_err(error)?;

    // Reuse the cached prefix; at least one token must be fed to get logits.
    let mut common = l
        .cached
        .iter()
        .zip(&ids)
        .take_while(|(a, b)| a == b)
        .count()
        .min(ids.len() - 1);
    if l.cached.len() - common > l.engine.rewind_limit() {
        common = 0;
    }
    l.engine.truncate(l.seq, common).map_err(error)?;
    l.cached.truncate(common);

    let t0 = js::now_ms();
    let mut logits = l
        .engine
        .prefill_async(l.seq, &ids[common..])
        .await
        .map_err(error)?;
    l.cached.extend_from_slice(&ids[common..]);
    let prompt_ms = js::now_ms() - t0;

    let mut decoder = StreamDecoder::new(false);
    let mut stops = StopMatcher::new(opts.stop.iter().cloned());
    let mut text = String::new();
    let mut tokens: Vec<u32> = Vec::new();
    let mut finish = "length";
    let mut decode_ms = 0.0;
    let mut decode_steps = 0usize;
    let emit = |s: &str, text: &mut String| {
        if !s.is_empty() {
            text.push_str(s);
            let _ = on_text.call1(&JsValue::NULL, &s.into());
        }
    };
    for i in 0..opts.max_tokens {
        let tok = sampler.sample(&mut logits, &l.cached);
        if !opts.ignore_eos && l.stop_ids.contains(&tok) {
            finish = "stop";
            break;
        }
        tokens.push(tok);
        let piece = decoder.push(&l.tokenizer, tok);
        let step = stops.push(&piece);
        emit(&step.text, &mut text);
        if step.stopped.is_some() {
            finish = "stop";
            break;
        }
        js::yield_now().await;
        if js::aborted(signal) {
            finish = "abort";
            break;
        }
        if i + 1 == opts.max_tokens || l.cached.len() + 1 >= l.n_ctx {
            break;
        }
        let t = js::now_ms();
        logits = l.engine.decode_async(l.seq, tok).await.map_err(error)?;
        l.cached.push(tok);
        decode_ms += js::now_ms() - t;
        decode_steps += 1;
    }
    if finish != "stop" {
        let rest = stops.finish();
        emit(&rest, &mut text);
    }
    let rate = |n: usize, ms: f64| {
        if ms > 0.0 {
            n as f64 * 1000.0 / ms
        } else {
            0.0
        }
    };
    js::to_js(&serde_json::json!({
        "text": text,
        "tokens": tokens,
        "finishReason": finish,
        "usage": {
            "promptTokens": ids.len(),
            "cachedPromptTokens": common,
            "completionTokens": tokens.len(),
        },
        "timings": {
            "promptMs": prompt_ms,
            "promptTokensPerS": rate(ids.len() - common, prompt_ms),
            "decodeMs": decode_ms,
            "decodeSteps": decode_steps,
            "tokensPerS": rate(decode_steps, decode_ms),
            "totalMs": js::now_ms() - t0,
        },
    }))
}
