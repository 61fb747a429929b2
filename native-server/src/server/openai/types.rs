//! The OpenAI surface's request and response bodies, as the official client sends and reads
//! them (plus the extensions `top_k`, `min_p`, `repeat_penalty`, `ignore_eos`, `options`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use weft_core::chat::Message;

use crate::server::code::types::{ExecutedCall, SkillFields};
use crate::server::common::ids;
use crate::server::common::options::Options;
use crate::server::common::tools::ToolCall;
use crate::server::common::OneOrMany;

/// Fields chat and completions share.
#[derive(Debug, Default, Deserialize, ToSchema)]
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
    /// Token id (as a string) → bias in [-100, 100]; -100 bans the token.
    pub logit_bias: Option<BTreeMap<String, f32>>,
    /// Independent completions (1–16).
    pub n: Option<i64>,
    /// Accepted (OpenAI end-user id) and not used.
    #[allow(dead_code)]
    pub user: Option<String>,
    /// Ollama-style options (top-level fields win over them).
    pub options: Option<Options>,
    /// Extension (as vLLM): keep generating past end-of-generation tokens.
    pub ignore_eos: Option<bool>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatRequest {
    #[schema(value_type = Option<Vec<Object>>)]
    pub messages: Option<Vec<Message>>,
    #[serde(flatten)]
    pub common: Common,
    pub logprobs: Option<bool>,
    pub top_logprobs: Option<i64>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<Value>,
    /// Accepted; the model decides how many calls it makes.
    #[allow(dead_code)]
    pub parallel_tool_calls: Option<bool>,
    #[schema(value_type = Option<Object>)]
    pub response_format: Option<Value>,
    /// Extension (as the peer server): reasoning on or off, for models that write it.
    pub think: Option<bool>,
    /// `"none"` switches reasoning off; any other effort leaves it on (no template here takes
    /// a level).
    pub reasoning_effort: Option<String>,
    /// Extension (as llama.cpp's server and vLLM): further chat template variables, e.g.
    /// `{"enable_thinking": false}`.
    #[schema(value_type = Option<Object>)]
    pub chat_template_kwargs: Option<Map<String, Value>>,
    /// Extension: agent skills (`skills`, `skills_discovery`).
    #[serde(flatten)]
    pub skills: SkillFields,
}

/// `POST /v1/completions`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CompletionRequest {
    /// A string, a one-string array, or an array of token ids.
    #[schema(value_type = Option<Object>)]
    pub prompt: Option<Value>,
    #[serde(flatten)]
    pub common: Common,
    pub echo: Option<bool>,
    pub logprobs: Option<i64>,
    pub suffix: Option<String>,
    pub best_of: Option<i64>,
}

/// `POST /v1/tokenize`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct TokenizeRequest {
    #[serde(alias = "prompt", alias = "text")]
    pub content: String,
    #[serde(default = "yes")]
    pub add_special: bool,
    pub model: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenizeResponse {
    pub tokens: Vec<u32>,
    pub count: usize,
    pub max_model_len: usize,
}

/// `POST /v1/detokenize`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct DetokenizeRequest {
    pub tokens: Vec<i64>,
    pub model: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DetokenizeResponse {
    pub prompt: String,
    pub content: String,
}

/// One model in `GET /v1/models`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelObject {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub owned_by: &'static str,
}

impl ModelObject {
    pub fn new(id: &str, created: u64) -> Self {
        ModelObject {
            id: id.to_string(),
            object: "model",
            created,
            owned_by: "weft",
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ModelList {
    pub object: &'static str,
    pub data: Vec<ModelObject>,
}

/// Token counts of a response.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub total_tokens: usize,
    pub prompt_tokens_details: PromptTokensDetails,
}

#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct PromptTokensDetails {
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: usize,
}

/// A tool call in OpenAI's shape (`arguments` as a JSON string).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct OpenAiToolCall {
    /// In stream deltas only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionCall,
}

#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
}

impl OpenAiToolCall {
    /// A call with a fresh id; `index` for stream deltas.
    pub fn from_call(c: &ToolCall, index: Option<usize>) -> Self {
        OpenAiToolCall {
            index,
            id: format!("call_{}", ids::unique()),
            kind: "function",
            function: FunctionCall {
                name: c.name.clone(),
                arguments: c.arguments.to_string(),
            },
        }
    }
}

/// The assistant's reply in a non-streamed chat completion.
#[derive(Debug, Serialize, ToSchema)]
pub struct AssistantMessage {
    pub role: &'static str,
    /// Null when the reply is only tool calls.
    pub content: Option<String>,
    /// The model's reasoning, apart from `content` (models that write it; the field
    /// llama.cpp's server and vLLM use).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    pub refusal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<OpenAiToolCall>>,
    /// Extension, with `--code-exec` or `skills`: the built-in calls the server executed while
    /// answering (absent when it executed none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executed_calls: Option<Vec<ExecutedCall>>,
}

/// One token's log-probability (chat shape).
#[derive(Debug, Serialize, ToSchema)]
pub struct TopLogprob {
    pub token: String,
    pub logprob: f32,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LogprobEntry {
    pub token: String,
    pub logprob: f32,
    pub bytes: Vec<u8>,
    pub top_logprobs: Vec<TopLogprob>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChatLogprobs {
    pub content: Vec<LogprobEntry>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChatChoice {
    pub index: usize,
    pub message: AssistantMessage,
    pub logprobs: Option<ChatLogprobs>,
    pub finish_reason: Option<&'static str>,
}

/// A non-streamed chat completion.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatCompletion {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub system_fingerprint: String,
    pub choices: Vec<ChatChoice>,
    pub usage: Usage,
}

/// What a streamed chat chunk adds to a choice.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct ChatDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// A piece of the model's reasoning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<OpenAiToolCall>>,
    /// Extension: on the chunk with `finish_reason`, the built-in calls the server executed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executed_calls: Option<Vec<ExecutedCall>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChatChunkChoice {
    pub index: usize,
    pub delta: ChatDelta,
    pub logprobs: Option<ChatLogprobs>,
    pub finish_reason: Option<&'static str>,
}

/// One `data:` frame of a streamed chat completion.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatCompletionChunk {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub system_fingerprint: String,
    pub choices: Vec<ChatChunkChoice>,
    /// On the last chunk (with `choices: []`) when `stream_options.include_usage` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Legacy completions' logprobs.
#[derive(Debug, Serialize, ToSchema)]
pub struct LegacyLogprobs {
    pub tokens: Vec<String>,
    pub token_logprobs: Vec<f32>,
    /// Per token: alternative text → logprob.
    #[schema(value_type = Vec<Object>)]
    pub top_logprobs: Vec<Map<String, Value>>,
    pub text_offset: Vec<usize>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CompletionChoice {
    pub index: usize,
    pub text: String,
    pub logprobs: Option<LegacyLogprobs>,
    pub finish_reason: Option<&'static str>,
}

/// A text completion, or one `data:` frame of a streamed one.
#[derive(Debug, Serialize, ToSchema)]
pub struct Completion {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub system_fingerprint: String,
    pub choices: Vec<CompletionChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}
