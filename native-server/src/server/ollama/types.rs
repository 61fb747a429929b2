//! The Ollama surface's request and response bodies, as the official `ollama` client sends and
//! reads them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use weft_core::chat::Message;

use crate::registry::Facts;
use crate::server::code::types::{ExecutedCall, SkillFields};
use crate::server::common::options::Options;
use crate::server::common::tools::ToolCall;

/// A chat message as Ollama sends it (`tool_calls` arguments as objects, `tool_name` on tool
/// results, `images` refused for text-only models).
#[derive(Debug, Deserialize, ToSchema)]
pub struct OllamaMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub images: Option<Vec<Value>>,
    /// Calls an assistant made earlier (`{"function": {"name", "arguments": {...}}}`).
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tool_calls: Option<Vec<weft_core::chat::ToolCall>>,
    /// On `tool` messages: which tool produced the content.
    #[serde(default)]
    pub tool_name: Option<String>,
}

impl OllamaMessage {
    /// The message, its `images` taken into `images` (their markers before its text).
    pub fn into_message_with(
        mut self,
        images: &mut crate::server::common::images::Images,
    ) -> Result<Message, crate::server::error::ApiError> {
        let marks = images.add_list(self.images.take().as_deref())?;
        if !marks.is_empty() {
            self.content = Some(marks + self.content.as_deref().unwrap_or_default());
        }
        Ok(self.into_message())
    }

    pub fn into_message(self) -> Message {
        let mut m = Message::new(self.role, self.content.unwrap_or_default());
        m.tool_calls = self.tool_calls;
        m.name = self.tool_name;
        m
    }
}

/// `POST /api/chat` (Ollama's shape) and `/api/chat/ollama`.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = OllamaChatRequest)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Option<Vec<OllamaMessage>>,
    pub stream: Option<bool>,
    pub options: Option<Options>,
    /// `"json"` or a JSON schema.
    #[schema(value_type = Option<Object>)]
    pub format: Option<Value>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    /// Seconds or a duration (`"5m"`); 0 unloads after this request, negative keeps.
    #[schema(value_type = Option<Object>)]
    pub keep_alive: Option<Value>,
    /// Reasoning on (`true`, or a level `"high"`/`"medium"`/`"low"`) or off (`false`), for
    /// models that write it; see [`think_switch`].
    #[schema(value_type = Option<Object>)]
    pub think: Option<Value>,
    /// Extension: agent skills (`skills`, `skills_discovery`).
    #[serde(flatten)]
    pub skills: SkillFields,
}

/// `POST /api/generate`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct GenerateRequest {
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub system: Option<String>,
    pub suffix: Option<String>,
    #[serde(default)]
    pub raw: bool,
    pub stream: Option<bool>,
    pub options: Option<Options>,
    #[schema(value_type = Option<Object>)]
    pub format: Option<Value>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub images: Option<Vec<Value>>,
    #[schema(value_type = Option<Object>)]
    pub keep_alive: Option<Value>,
    /// As on `/api/chat`.
    #[schema(value_type = Option<Object>)]
    pub think: Option<Value>,
}

/// Ollama's `think`: a boolean, or a level (`"high"`, `"medium"`, `"low"`: reasoning on, since
/// no template here takes a level).
pub fn think_switch(v: Option<&Value>) -> Result<Option<bool>, crate::server::error::ApiError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if ["high", "medium", "low"].contains(&s.as_str()) => Ok(Some(true)),
        Some(other) => Err(crate::server::error::ApiError::invalid(format!(
            "think must be true, false, \"high\", \"medium\" or \"low\", got {other}"
        ))),
    }
}

/// A tool call in Ollama's shape (`arguments` as an object).
#[derive(Debug, Serialize, ToSchema)]
pub struct OllamaToolCall {
    pub function: OllamaFunction,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OllamaFunction {
    pub name: String,
    #[schema(value_type = Object)]
    pub arguments: Value,
}

impl From<&ToolCall> for OllamaToolCall {
    fn from(c: &ToolCall) -> Self {
        OllamaToolCall {
            function: OllamaFunction {
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            },
        }
    }
}

/// The assistant's message in a chat frame.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReplyMessage {
    pub role: &'static str,
    pub content: String,
    /// The model's reasoning, apart from `content` (models that write it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<OllamaToolCall>>,
    /// Extension, with `--code-exec` or `skills`: the built-in calls the server executed while
    /// answering (on the final frame; absent when it executed none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executed_calls: Option<Vec<ExecutedCall>>,
}

/// The figures of a final frame (durations in nanoseconds).
#[derive(Debug, Serialize, ToSchema)]
pub struct Timings {
    pub total_duration: u64,
    pub load_duration: u64,
    pub prompt_eval_count: usize,
    pub prompt_eval_duration: u64,
    pub eval_count: usize,
    pub eval_duration: u64,
    /// Prompt tokens served from the prefix cache (extension).
    pub prompt_cache_hit_tokens: usize,
    pub prompt_cache_hit_ratio: f64,
}

/// What a frame carries: a chat message or a generate response.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Payload {
    Chat {
        message: ReplyMessage,
    },
    Generate {
        response: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        thinking: Option<String>,
    },
}

/// One NDJSON line of `/api/chat` or `/api/generate` (or the whole non-streamed response).
#[derive(Debug, Serialize, ToSchema)]
pub struct Frame {
    pub model: String,
    pub created_at: String,
    #[serde(flatten)]
    pub payload: Payload,
    pub done: bool,
    /// `stop`, `length`, or `load` / `unload` for an empty request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub done_reason: Option<&'static str>,
    #[serde(flatten)]
    pub timings: Option<Timings>,
}

/// The error line that ends a failed stream.
#[derive(Debug, Serialize, ToSchema)]
pub struct StreamError {
    pub error: String,
}

/// `GET /api/version`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Version {
    pub version: &'static str,
}

/// Ollama's `details` object.
#[derive(Debug, Serialize, ToSchema)]
pub struct Details {
    pub parent_model: String,
    pub format: &'static str,
    pub family: String,
    pub families: Vec<String>,
    pub parameter_size: String,
    pub quantization_level: String,
}

impl Details {
    pub fn of(f: &Facts) -> Details {
        Details {
            parent_model: String::new(),
            format: "gguf",
            family: f.architecture.clone(),
            families: vec![f.architecture.clone()],
            parameter_size: f.parameter_size(),
            quantization_level: f.quantization.clone(),
        }
    }

    /// Details of a file that could not be read.
    pub fn unknown() -> Details {
        Details {
            parent_model: String::new(),
            format: "gguf",
            family: String::new(),
            families: vec![],
            parameter_size: String::new(),
            quantization_level: String::new(),
        }
    }
}

/// One `/api/tags` entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct TagEntry {
    pub name: String,
    pub model: String,
    pub modified_at: String,
    pub size: u64,
    pub digest: String,
    pub details: Details,
    /// Why the file cannot be used (extension), when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TagsResponse {
    pub models: Vec<TagEntry>,
}

/// One `/api/ps` entry: a resident model.
#[derive(Debug, Serialize, ToSchema)]
pub struct PsEntry {
    #[serde(flatten)]
    pub tag: TagEntry,
    pub expires_at: String,
    pub size_vram: u64,
    pub context_length: usize,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PsResponse {
    pub models: Vec<PsEntry>,
}

/// `POST /api/show`, `/api/delete`: the model by name.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ModelRef {
    #[serde(alias = "name")]
    pub model: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ShowResponse {
    pub modelfile: String,
    pub parameters: String,
    pub template: String,
    pub details: Details,
    #[schema(value_type = Object)]
    pub model_info: Map<String, Value>,
    pub capabilities: Vec<&'static str>,
    pub modified_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
}

/// `POST /api/copy`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CopyRequest {
    pub source: Option<String>,
    pub destination: Option<String>,
}

/// `POST /api/create`: a new name from an existing model.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateRequest {
    #[serde(alias = "name")]
    pub model: Option<String>,
    pub from: Option<String>,
    pub system: Option<String>,
    pub template: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Map<String, Value>>,
    pub stream: Option<bool>,
    #[schema(value_type = Option<Object>)]
    pub files: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub adapters: Option<Value>,
    pub quantize: Option<String>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub messages: Option<Vec<Value>>,
    #[allow(dead_code)]
    #[schema(value_type = Option<Object>)]
    pub license: Option<Value>,
    pub modelfile: Option<String>,
}

/// A progress or final line of `/api/create`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    pub status: &'static str,
}
