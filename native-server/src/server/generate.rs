//! The internal request every surface translates into, and the event stream it gets back.
//!
//! Adapters build a [`GenRequest`] (prompt ids, sampling, limits) with the helpers here, call
//! [`start`], and translate the `(choice index, Event)` stream into their wire format.

use std::sync::Arc;

pub use super::common::reply::Reasoning;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use weft_core::chat::{opens_reasoning, Message};
use weft_core::sampler::{JsonSchema, SamplerConfig};
use weft_core::scheduler::{
    Event, EventSink, Failure, Finish, MediaPrompt, Request, Summary, TokenInfo,
};

use super::auth::context::RequestCtx;
use super::auth::usage::Meter;
use super::common::tool_choice::Offered;
use super::error::ApiError;
use super::leased::Leased;
use super::moderation::output::{OutputFilter, Step};
use crate::registry::Loaded;

/// One generation request, whatever API it came from.
#[derive(Clone, Debug)]
pub struct GenRequest {
    pub prompt: Vec<u32>,
    pub sampling: SamplerConfig,
    pub max_tokens: usize,
    pub stop: Vec<String>,
    /// `Some(n)`: per-token log-probabilities with `n` alternatives.
    pub logprobs: Option<usize>,
    /// Independent completions of the same prompt (OpenAI `n`).
    pub n: usize,
    /// Keep generating past end-of-generation tokens (vLLM's `ignore_eos`).
    pub ignore_eos: bool,
    /// Structured output: constrain the output to one JSON value of this schema.
    pub json: Option<Arc<JsonSchema>>,
    /// The prompt with its images, when it has any (`prompt` then holds its cache keys).
    pub media: Option<Arc<MediaPrompt>>,
}

impl GenRequest {
    /// One choice of `prompt` with `sampling`: no stop strings, logprobs or output
    /// constraint (what the chat UI asks for, with or without the tool loop).
    pub fn plain(prompt: Vec<u32>, sampling: SamplerConfig, max_tokens: usize) -> Self {
        GenRequest {
            prompt,
            sampling,
            max_tokens,
            stop: vec![],
            logprobs: None,
            n: 1,
            ignore_eos: false,
            json: None,
            media: None,
        }
    }
}

/// Events of all choices of a request, tagged with the choice index.
pub type EventStream = UnboundedReceiver<(usize, Event)>;

struct ChannelSink {
    tx: UnboundedSender<(usize, Event)>,
    index: usize,
    /// The request's span (request id, route), entered to log how the sequence ended.
    span: tracing::Span,
    model: String,
    /// The request's context: its token counts are added here for the request log.
    ctx: RequestCtx,
    /// Output moderation, when the request's rules check output.
    filter: Option<OutputFilter>,
    /// An output rule blocked the sequence: later events are not sent.
    blocked: bool,
    /// Counts the sequence's tokens against its key and tenant when it ends.
    meter: Option<Arc<Meter>>,
}

impl EventSink for ChannelSink {
    fn send(&mut self, event: Event) -> bool {
        if let Event::Done(s) = &event {
            let prompt = if self.index == 0 { s.prompt_tokens } else { 0 };
            self.ctx.add_usage(&self.model, prompt, s.completion_tokens);
        }
        if self.blocked {
            return false;
        }
        let event = match self.moderate(event) {
            Ok(e) => e,
            Err(shown) => {
                self.blocked = true;
                for e in shown {
                    let _ = self.tx.send((self.index, e));
                }
                return false;
            }
        };
        match &event {
            Event::Done(s) => self.span.in_scope(|| {
                tracing::info!(
                    model = %self.model,
                    choice = self.index,
                    finish = s.finish.as_str(),
                    prompt_tokens = s.prompt_tokens,
                    cached_tokens = s.cached_tokens,
                    completion_tokens = s.completion_tokens,
                    queue_ms = (s.queue_secs * 1e3) as u64,
                    prompt_ms = (s.prompt_secs * 1e3) as u64,
                    gen_ms = (s.gen_secs * 1e3) as u64,
                    "generation finished"
                )
            }),
            Event::Failed(f) => self.span.in_scope(|| {
                tracing::warn!(model = %self.model, choice = self.index, error = %f, "generation failed")
            }),
            _ => {}
        }
        if let (Event::Done(s), Some(m)) = (&event, &self.meter) {
            // The last event waits for the usage to be recorded, so the client's next request
            // (on any replica) is checked against it.
            let tokens = (s.prompt_tokens + s.completion_tokens) as u64;
            let (tx, index) = (self.tx.clone(), self.index);
            m.record(tokens, move || {
                let _ = tx.send((index, event));
            });
            return !self.tx.is_closed();
        }
        self.tx.send((self.index, event)).is_ok()
    }
    fn is_closed(&self) -> bool {
        self.blocked || self.tx.is_closed()
    }
}

impl ChannelSink {
    /// Runs output text through the moderation filter: `Ok` with the event to send (its text
    /// possibly held back in part), or `Err` with the events that end a blocked sequence.
    fn moderate(&mut self, event: Event) -> Result<Event, Vec<Event>> {
        let Some(f) = self.filter.as_mut() else {
            return Ok(event);
        };
        let (step, done) = match event {
            Event::Delta { text, tokens } => (f.push(&text, tokens), None),
            Event::Done(s) => (f.finish(), Some(s)),
            other => return Ok(other),
        };
        match step {
            Step::Pass(text, tokens) => match done {
                Some(s) => {
                    if !text.is_empty() || !tokens.is_empty() {
                        let _ = self.tx.send((self.index, Event::Delta { text, tokens }));
                    }
                    Ok(Event::Done(s))
                }
                None => Ok(Event::Delta { text, tokens }),
            },
            Step::Block(text, msg) => {
                self.span.in_scope(|| {
                    tracing::info!(model = %self.model, choice = self.index, "output blocked by moderation")
                });
                let mut out = Vec::new();
                if !text.is_empty() {
                    out.push(Event::Delta {
                        text,
                        tokens: Vec::new(),
                    });
                }
                out.push(Event::Failed(Failure::Blocked(msg)));
                Err(out)
            }
        }
    }
}

/// Submits the request (`n` sequences). Dropping the stream cancels them.
///
/// Output moderation, metering and the request log's token counts hook in here, once for
/// every surface, with the context the model was leased for: the sink filters each
/// sequence's text with that request's rules and counts its tokens against its key.
pub fn start(model: &Leased, req: GenRequest) -> Result<EventStream, ApiError> {
    let (tx, rx) = unbounded_channel();
    let ctx = model.ctx().clone();
    let meter = ctx.meter().map(Arc::new);
    for index in 0..req.n.max(1) {
        let mut sampling = req.sampling.clone();
        if let Some(s) = sampling.seed.as_mut() {
            *s = s.wrapping_add(index as u64);
        }
        let r = Request {
            prompt: req.prompt.clone(),
            sampling,
            max_tokens: req.max_tokens,
            stop: req.stop.clone(),
            ignore_eos: req.ignore_eos,
            logprobs: req.logprobs,
            json: req.json.clone(),
            media: req.media.clone(),
            sink: Box::new(ChannelSink {
                tx: tx.clone(),
                index,
                span: tracing::Span::current(),
                model: model.name.clone(),
                filter: OutputFilter::for_request(&ctx),
                ctx: ctx.clone(),
                blocked: false,
                meter: meter.clone(),
            }),
        };
        let handle = model.handle.as_ref().ok_or_else(not_generative)?;
        handle.submit(r)?;
    }
    Ok(rx)
}

/// A chat or completion request to an embedding model: 400.
pub fn not_generative() -> ApiError {
    ApiError::invalid("the model does not generate text: it is an embedding model (use /v1/embeddings or /api/embed)")
}

/// What a request asks of the model's reasoning: `enabled` (Ollama's and the chat UI's `think`,
/// OpenAI's `think` / `reasoning_effort`) becomes the template's `enable_thinking` switch, and
/// `template_vars` (OpenAI's `chat_template_kwargs`) are further template variables.
#[derive(Clone, Debug, Default)]
pub struct Think {
    pub enabled: Option<bool>,
    pub template_vars: serde_json::Map<String, serde_json::Value>,
}

impl Think {
    /// Just the switch.
    pub fn enabled(enabled: Option<bool>) -> Think {
        Think {
            enabled,
            ..Default::default()
        }
    }
}

/// A rendered and tokenized chat prompt.
#[derive(Clone, Debug)]
pub struct ChatPrompt {
    pub ids: Vec<u32>,
    pub reasoning: Reasoning,
    /// The rendered text `ids` came from (where images' markers are found).
    pub text: String,
    /// The prompt with its images (`common::images`); `ids` then are its cache keys.
    pub media: Option<Arc<MediaPrompt>>,
}

/// Renders a conversation (and the tools it may call) with the model's chat template and
/// tokenizes it. `opening` is text the assistant's reply starts with, written after the
/// generation prompt (a forced tool call's tag; usually empty). A model name with its own
/// system prompt gets it first when the conversation has none. Asking a model that writes no
/// reasoning to think is a 400, as in Ollama.
pub fn chat_prompt(
    model: &Leased,
    messages: &[Message],
    tools: Option<&[serde_json::Value]>,
    opening: &str,
    think: &Think,
) -> Result<ChatPrompt, ApiError> {
    if model.handle.is_none() {
        return Err(not_generative());
    }
    if messages.is_empty() {
        return Err(ApiError::invalid("messages must not be empty"));
    }
    // Input moderation for every chat surface: the user's messages, before anything runs.
    super::moderation::check_messages(model.ctx(), messages)?;
    let template = model.template().ok_or_else(|| {
        ApiError::invalid("this model has no chat template; use the completions endpoint")
    })?;
    let marks = template.marks_reasoning();
    if think.enabled == Some(true) && !marks {
        return Err(ApiError::invalid(format!(
            "model {:?} does not support thinking: its chat template marks no reasoning",
            model.name
        )));
    }
    let with_system;
    let messages = match &model.overrides.system {
        Some(sys) if messages.first().is_none_or(|m| m.role != "system") => {
            with_system = std::iter::once(Message::system(sys.clone()))
                .chain(messages.iter().cloned())
                .collect::<Vec<_>>();
            &with_system[..]
        }
        _ => messages,
    };
    let mut vars = think.template_vars.clone();
    if let (Some(on), true) = (think.enabled, marks) {
        vars.entry("enable_thinking")
            .or_insert(serde_json::Value::Bool(on));
    }
    let extra = (!vars.is_empty()).then_some(serde_json::Value::Object(vars));
    let mut text = template
        .render(messages, tools, true, extra)
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    text.push_str(opening);
    let reasoning = match (marks, opens_reasoning(&text)) {
        (false, _) => Reasoning::Absent,
        (true, false) => Reasoning::Closed,
        (true, true) => Reasoning::Open,
    };
    Ok(ChatPrompt {
        ids: model.tokenizer.encode_prompt(&text, true),
        reasoning,
        text,
        media: None,
    })
}

/// [`chat_prompt`] for a conversation offered `tools`, with the constraint decoding follows:
/// a forced call opens the reply with its tag and its schema replaces `format` (the reply is
/// the call, not text).
pub fn tool_chat_prompt(
    model: &Leased,
    messages: &[Message],
    tools: Option<&Offered>,
    format: Option<Arc<JsonSchema>>,
    think: &Think,
) -> Result<(ChatPrompt, Option<Arc<JsonSchema>>), ApiError> {
    let forced = tools.and_then(|t| t.forced.as_ref());
    let opening = forced.map_or("", |f| f.opening);
    let defs = tools.map(|t| t.defs.as_slice());
    let json = forced.map(|f| f.schema.clone()).or(format);
    let prompt = constrained_chat_prompt(model, messages, defs, opening, think, json.is_some())?;
    Ok((prompt, json))
}

/// [`chat_prompt`] for a reply that may be `constrained` to JSON (structured output or a forced
/// call). A constrained reply has no room for reasoning: it is switched off where the template
/// can, and a template that opens it regardless is a 400, as is asking for both.
pub fn constrained_chat_prompt(
    model: &Leased,
    messages: &[Message],
    tools: Option<&[serde_json::Value]>,
    opening: &str,
    think: &Think,
    constrained: bool,
) -> Result<ChatPrompt, ApiError> {
    if !constrained {
        return chat_prompt(model, messages, tools, opening, think);
    }
    if think.enabled == Some(true) {
        return Err(ApiError::invalid(
            "thinking cannot be combined with structured output or a forced tool call",
        ));
    }
    let mut think = think.clone();
    if model.template().is_some_and(|t| t.switches_reasoning()) {
        think.enabled = Some(false);
    }
    let prompt = chat_prompt(model, messages, tools, opening, &think)?;
    if prompt.reasoning == Reasoning::Open {
        return Err(ApiError::invalid(
            "this model's template opens its reasoning in the prompt, so its reply cannot be constrained to JSON or a forced tool call",
        ));
    }
    Ok(prompt)
}

/// A raw prompt the user wrote (completions, Ollama's `raw`): checked by the input moderation
/// rules, then tokenized with the one BOS rule ([`Tokenizer::encode_prompt`]
/// (weft_core::tokenizer::Tokenizer::encode_prompt)): BOS when the model wants one and the text
/// does not already start with it.
pub fn text_prompt(model: &Leased, text: &str) -> Result<Vec<u32>, ApiError> {
    super::moderation::check_text(model.ctx(), text)?;
    Ok(model.tokenizer.encode_prompt(text, true))
}

/// What one choice produced, for non-streaming responses.
#[derive(Clone, Debug, Default)]
pub struct Collected {
    pub text: String,
    pub tokens: Vec<TokenInfo>,
    pub summary: Option<Summary>,
}

/// Waits for every choice to finish.
pub async fn collect(mut rx: EventStream, n: usize) -> Result<Vec<Collected>, ApiError> {
    let mut out = vec![Collected::default(); n.max(1)];
    let mut finished = 0;
    while let Some((i, ev)) = rx.recv().await {
        let c = &mut out[i];
        match ev {
            Event::Started { .. } | Event::Queued { .. } => {}
            Event::Delta { text, tokens } => {
                c.text.push_str(&text);
                c.tokens.extend(tokens);
            }
            Event::Done(s) => {
                c.summary = Some(s);
                finished += 1;
                if finished == out.len() {
                    break;
                }
            }
            Event::Failed(f) => return Err(f.into()),
        }
    }
    if finished < out.len() {
        return Err(ApiError::unavailable("the scheduler stopped"));
    }
    Ok(out)
}

/// The error a failed sequence answers with.
pub fn failure(f: Failure) -> ApiError {
    f.into()
}

/// Text of one token, for logprobs (lossy for partial UTF-8 pieces, as OpenAI does).
pub fn token_text(model: &Loaded, id: u32) -> (String, Vec<u8>) {
    let b = model.tokenizer.token_bytes(id, true);
    (String::from_utf8_lossy(&b).into_owned(), b)
}

/// `finish_reason` for a summary (a cancelled request never reaches a client).
pub fn finish_reason(s: &Summary) -> &'static str {
    match s.finish {
        Finish::Length => "length",
        Finish::Stop | Finish::Cancelled => "stop",
    }
}
