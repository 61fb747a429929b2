//! The chat-UI protocol's request and response bodies (`../shared/seeds`' chat-UI document).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use weft_core::chat::Message;

use crate::server::code::types::{SkillFields, SkillStepFrame, ToolProgressFrame};

/// `POST /api/ui/chat` (and `/api/chat` with this shape).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UiChatRequest {
    /// Which served model (the default one when absent; see `/api/models`).
    #[serde(alias = "modelName")]
    pub model: Option<String>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub messages: Option<Vec<Message>>,
    pub max_tokens: Option<i64>,
    pub session_id: Option<String>,
    #[serde(default)]
    pub new_chat: bool,
    /// Reasoning on or off, for models whose template can switch it (`enable_thinking`).
    pub think: Option<bool>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub seed: Option<i64>,
    /// Agent skills (`skills`, `skills_discovery`); built-in calls run in the session's
    /// workspace.
    #[serde(flatten)]
    pub skills: SkillFields,
}

/// A `data:` frame of the chat-UI stream.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum UiFrame {
    Token {
        token: String,
    },
    Thinking {
        thinking: String,
    },
    /// The request waits for a slot (sent again when its place changes).
    Queue {
        queue_position: usize,
        queue_pending: usize,
    },
    /// The model called the client's own tools (`tools` in the request).
    ToolCalls {
        tool_calls: Vec<UiToolCall>,
    },
    /// A built-in call is running / finished.
    ToolProgress(ToolProgressFrame),
    /// A built-in call's result, with the files it wrote.
    SkillStep(SkillStepFrame),
    Done(Box<DoneFrame>),
}

/// A call of one of the client's tools, as the chat-UI document shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct UiToolCall {
    pub name: String,
    #[schema(value_type = Object)]
    pub arguments: Value,
}

/// The terminal frame.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoneFrame {
    pub done: bool,
    pub token_count: usize,
    pub elapsed: f64,
    pub tok_per_sec: f64,
    pub aborted: bool,
    pub error: Option<String>,
    pub session_id: String,
    pub prompt_tokens: usize,
    pub kv_reused_tokens: usize,
    pub kv_reuse_percent: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<&'static str>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionCreated {
    pub session_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionDeleted {
    pub ok: bool,
    pub session_id: String,
}

/// One model in `/api/models`.
#[derive(Debug, Serialize, ToSchema)]
pub struct UiModel {
    pub name: String,
    pub file: Option<String>,
    pub architecture: Option<String>,
    pub loaded: bool,
    pub broken: Option<String>,
    /// The vision projector file the model is served with (null: text only; the chat page
    /// offers images only when it is set).
    pub projector: Option<String>,
}

/// `GET /api/models`: the default model, every model, settings.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UiModels {
    pub model: Option<String>,
    pub file: Option<String>,
    pub loaded: bool,
    pub backend: String,
    pub supported_backends: Vec<&'static str>,
    pub architecture: Option<String>,
    pub context_length: usize,
    pub default_max_tokens: usize,
    pub parallel: usize,
    /// The default model's vision projector file (null: none); video support: none yet.
    #[schema(value_type = Option<Object>)]
    pub projector: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub video: Option<Value>,
    /// Whether the UI shows its skills control (null: skills disabled).
    pub skills: Option<UiSkills>,
    pub models: Vec<UiModel>,
}

/// `GET /api/queue/status`.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueStatus {
    pub pending_requests: u64,
    pub running_requests: u64,
    pub queue_capacity: usize,
    pub parallel: usize,
}

/// The `skills` field of `GET /api/models`.
#[derive(Debug, Serialize, ToSchema)]
pub struct UiSkills {
    pub enabled: bool,
    pub installable: bool,
    pub count: usize,
}
