//! A streaming generation on the model's one sequence: core's [`Session`]
//! (weft_core::generation::Session) with every step's readback awaited, its text handed to
//! JavaScript, and a yield to the event loop between tokens so a stop request is seen.

use wasm_bindgen::prelude::*;
use weft_core::engine::Prompt;
use weft_core::generation::{Finish, Step};

use crate::js::{self, error};
use crate::options::GenOptions;
use crate::Loaded;

/// What to generate after: token ids, or a prompt holding images' embedding rows.
pub enum Input {
    Ids(Vec<u32>),
    Prompt {
        prompt: Prompt,
        /// The id the penalties' history sees at image rows.
        placeholder: u32,
        /// Positions the images take (in `usage.promptTokens` too).
        image_tokens: usize,
    },
}

/// Generates after `input`, streaming text deltas to `on_text`. Resolves to `{text, tokens,
/// finishReason, usage, timings}`.
pub async fn run(
    l: &mut Loaded,
    input: Input,
    opts: &GenOptions,
    on_text: &js_sys::Function,
    signal: &JsValue,
) -> Result<JsValue, JsValue> {
    let n = match &input {
        Input::Ids(ids) => ids.len(),
        Input::Prompt { prompt, .. } => prompt.len(),
    };
    if n == 0 {
        return Err(error("the prompt is empty"));
    }
    if n >= l.n_ctx {
        return Err(error(format!(
            "the prompt has {n} tokens but the context holds {}; shorten the conversation",
            l.n_ctx
        )));
    }
    let mut params = opts.params()?;
    if params.sampling.seed.is_none() {
        params.sampling.seed = Some((js_sys::Math::random() * 9.007_199_254_740_991e15) as u64);
    }
    if opts.top_logits > 20 {
        return Err(error("topLogits: at most 20"));
    }
    l.session.top_logits = opts.top_logits;
    let t0 = js::now_ms();
    let on_step = |step: &Step| {
        if !step.text.is_empty() {
            let _ = on_text.call1(&JsValue::NULL, &step.text.as_str().into());
        }
        let signal = signal.clone();
        async move {
            js::yield_now().await;
            !js::aborted(&signal)
        }
    };
    let (gen, image_tokens) = match &input {
        Input::Ids(ids) => (
            l.session
                .generate_async(&mut l.model, ids, &params, on_step)
                .await,
            0,
        ),
        Input::Prompt {
            prompt,
            placeholder,
            image_tokens,
        } => (
            l.session
                .generate_prompt_async(&mut l.model, prompt, *placeholder, &params, on_step)
                .await,
            *image_tokens,
        ),
    };
    l.session.top_logits = 0;
    let gen = gen.map_err(error)?;
    let finish = match gen.finish {
        Finish::Cancelled => "abort",
        f => f.as_str(),
    };
    let steps: Vec<serde_json::Value> = gen
        .steps
        .iter()
        .map(|s| serde_json::json!({"token": s.token, "top": s.top}))
        .collect();
    js::to_js(&serde_json::json!({
        "text": gen.text,
        "steps": steps,
        "tokens": gen.tokens,
        "finishReason": finish,
        "usage": {
            "promptTokens": gen.prompt_tokens,
            "cachedPromptTokens": gen.cached_tokens,
            "completionTokens": gen.tokens.len(),
            "imageTokens": image_tokens,
        },
        "timings": {
            "promptMs": gen.prompt_secs * 1000.0,
            "promptTokensPerS": gen.prompt_tokens_per_s(),
            "decodeMs": gen.decode_secs * 1000.0,
            "decodeSteps": gen.decode_tokens,
            "tokensPerS": gen.gen_tokens_per_s(),
            "totalMs": js::now_ms() - t0,
        },
    }))
}
