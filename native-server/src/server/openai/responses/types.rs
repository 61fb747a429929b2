//! The Responses API's bodies, in the shapes the official client's `openai.types.responses`
//! reads: the create request, the response object and its items, the stream events, and the
//! stored-response routes' answers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// `POST /v1/responses`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CreateRequest {
    pub model: Option<String>,
    /// A string (one user message) or a list of items: messages, `function_call` and
    /// `function_call_output` items.
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    /// A system message before the input; not carried over by `previous_response_id`.
    pub instructions: Option<String>,
    /// Function tools, `{"type": "function", "name", "description", "parameters", "strict"}`.
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<Value>,
    /// `{"format": {"type": "text" | "json_object" | "json_schema", ...}}`.
    #[schema(value_type = Option<Object>)]
    pub text: Option<Value>,
    pub max_output_tokens: Option<i64>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub stream: Option<bool>,
    /// Keep the response for `GET`, `previous_response_id` and `input_items` (default true).
    pub store: Option<bool>,
    pub previous_response_id: Option<String>,
    /// At most 16 pairs; keys up to 64 characters, values up to 512. Echoed back.
    pub metadata: Option<BTreeMap<String, String>>,
    /// Echoed back.
    pub user: Option<String>,
    /// Echoed back; the model decides how many calls it makes (as on chat completions).
    pub parallel_tool_calls: Option<bool>,
    /// `"disabled"` (the default) or `"auto"`; a conversation longer than the context is a
    /// 400 either way.
    pub truncation: Option<String>,
    /// Refused when set (400): these would change the result, and this server does not do
    /// them.
    #[schema(value_type = Option<Vec<String>>)]
    pub include: Option<Vec<Value>>,
    #[schema(value_type = Option<Object>)]
    pub reasoning: Option<Value>,
    pub background: Option<bool>,
    #[schema(value_type = Option<Object>)]
    pub conversation: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub prompt: Option<Value>,
    pub top_logprobs: Option<i64>,
    pub max_tool_calls: Option<i64>,
}

/// One item of a conversation: what a request's `input` holds and what a response's `output`
/// is made of. Every item has an id (the server makes one when the client sent none).
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Item {
    Message(MessageItem),
    FunctionCall(FunctionCallItem),
    FunctionCallOutput(FunctionCallOutputItem),
}

/// A message: input text parts for user / system / developer, output text for the assistant.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct MessageItem {
    pub id: String,
    pub role: String,
    /// `completed`, or `incomplete` for a reply cut short by `max_output_tokens`.
    pub status: &'static str,
    pub content: Vec<Part>,
}

/// A content part of a message.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    InputText {
        text: String,
    },
    OutputText {
        text: String,
        /// Always empty (no citations).
        #[schema(value_type = Vec<Object>)]
        annotations: Vec<Value>,
    },
    /// An image in a user message: a data URI (the request's image bounds apply, and the
    /// model needs a vision projector).
    InputImage {
        image_url: String,
        detail: String,
    },
}

impl Part {
    /// The part's text (an image has none).
    pub fn text(&self) -> &str {
        match self {
            Part::InputText { text } | Part::OutputText { text, .. } => text,
            Part::InputImage { .. } => "",
        }
    }
}

/// A call the model made (or, in input, one it made before).
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct FunctionCallItem {
    pub id: String,
    /// What the `function_call_output` answering it names.
    pub call_id: String,
    pub name: String,
    /// The arguments object as JSON text.
    pub arguments: String,
    pub status: &'static str,
}

/// The result of a call, sent back by the client.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct FunctionCallOutputItem {
    pub id: String,
    pub call_id: String,
    pub output: String,
    pub status: &'static str,
}

/// Token counts of a response.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ResponseUsage {
    pub input_tokens: usize,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: usize,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: usize,
}

#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct InputTokensDetails {
    /// Input tokens served from the prefix cache (not evaluated again).
    pub cached_tokens: usize,
    /// Always 0: the prefix cache is implicit, nothing is written to it on request.
    pub cache_write_tokens: usize,
}

#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct OutputTokensDetails {
    /// Always 0 (no separate reasoning output).
    pub reasoning_tokens: usize,
}

#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct IncompleteDetails {
    /// `max_output_tokens` (also when the context filled up).
    pub reason: &'static str,
}

/// A response (`object: "response"`), as created, streamed, stored and retrieved.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ResponseObject {
    /// `resp_…`.
    pub id: String,
    pub object: &'static str,
    pub created_at: u64,
    /// `in_progress` (in the first stream events), `completed` or `incomplete`.
    pub status: &'static str,
    pub completed_at: Option<u64>,
    pub incomplete_details: Option<IncompleteDetails>,
    /// Always null (a failed generation is an error response or an `error` stream event).
    #[schema(value_type = Option<Object>)]
    pub error: Option<Value>,
    pub model: String,
    pub output: Vec<Item>,
    pub usage: Option<ResponseUsage>,
    pub instructions: Option<String>,
    pub max_output_tokens: Option<i64>,
    pub metadata: BTreeMap<String, String>,
    pub parallel_tool_calls: bool,
    pub previous_response_id: Option<String>,
    pub store: bool,
    /// The sampling values used (after the model's and the operator's defaults).
    pub temperature: f32,
    pub top_p: f32,
    /// `{"format": ...}` as requested (`{"type": "text"}` by default).
    #[schema(value_type = Object)]
    pub text: Value,
    /// As requested (`"auto"` by default).
    #[schema(value_type = Object)]
    pub tool_choice: Value,
    /// As requested.
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<Value>,
    pub truncation: String,
    pub user: Option<String>,
    pub background: bool,
}

/// One event of a streamed response: an SSE frame whose `event:` line is its `type`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct StreamEvent {
    #[serde(flatten)]
    pub event: Event,
    /// 0, 1, 2, … over the stream.
    pub sequence_number: usize,
}

/// What a stream event says; `output_index` counts items of `output`, `content_index` parts
/// of a message.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[serde(tag = "type")]
pub enum Event {
    #[serde(rename = "response.created")]
    Created { response: Box<ResponseObject> },
    #[serde(rename = "response.in_progress")]
    InProgress { response: Box<ResponseObject> },
    #[serde(rename = "response.output_item.added")]
    ItemAdded { output_index: usize, item: Item },
    #[serde(rename = "response.content_part.added")]
    PartAdded {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: Part,
    },
    #[serde(rename = "response.output_text.delta")]
    TextDelta {
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
        /// Always empty.
        #[schema(value_type = Vec<Object>)]
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.output_text.done")]
    TextDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        text: String,
        #[schema(value_type = Vec<Object>)]
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.content_part.done")]
    PartDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: Part,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta {
        item_id: String,
        output_index: usize,
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    ArgumentsDone {
        item_id: String,
        output_index: usize,
        name: String,
        arguments: String,
    },
    #[serde(rename = "response.output_item.done")]
    ItemDone { output_index: usize, item: Item },
    #[serde(rename = "response.completed")]
    Completed { response: Box<ResponseObject> },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: Box<ResponseObject> },
    /// Generation failed mid-stream; the last event.
    #[serde(rename = "error")]
    Error {
        code: Option<String>,
        message: String,
        param: Option<String>,
    },
}

/// `DELETE /v1/responses/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Deleted {
    pub id: String,
    pub object: &'static str,
    pub deleted: bool,
}

/// `GET /v1/responses/{id}/input_items`: a page of the conversation's input items.
#[derive(Debug, Serialize, ToSchema)]
pub struct InputItemList {
    pub object: &'static str,
    pub data: Vec<Item>,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
    pub has_more: bool,
}
