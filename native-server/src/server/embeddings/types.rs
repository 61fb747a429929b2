//! The request and response bodies of the three embedding routes, as the OpenAI and Ollama
//! APIs spell them.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// `POST /v1/embeddings`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct OpenAiRequest {
    pub model: Option<String>,
    /// A string, an array of strings, an array of token ids, or an array of token-id arrays.
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    /// `float` (default) or `base64` (little-endian f32, what the official client asks for).
    pub encoding_format: Option<String>,
    pub dimensions: Option<i64>,
    #[allow(dead_code)]
    pub user: Option<String>,
}

/// One vector: numbers, or their bytes in base64.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Vector {
    Float(Vec<f32>),
    Base64(String),
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiItem {
    pub object: &'static str,
    pub index: usize,
    pub embedding: Vector,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiUsage {
    pub prompt_tokens: usize,
    pub total_tokens: usize,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiResponse {
    pub object: &'static str,
    pub data: Vec<OpenAiItem>,
    pub model: String,
    pub usage: OpenAiUsage,
}

/// `POST /api/embed` (Ollama).
#[derive(Debug, Deserialize, ToSchema)]
pub struct EmbedRequest {
    pub model: Option<String>,
    /// A string or an array of strings.
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    /// Cut inputs longer than the model takes (default true; false: too long is a 400).
    pub truncate: Option<bool>,
    pub dimensions: Option<i64>,
    #[schema(value_type = Option<Object>)]
    pub keep_alive: Option<Value>,
    /// Accepted; runtime options do not change embeddings.
    #[allow(dead_code)]
    #[schema(value_type = Option<Object>)]
    pub options: Option<Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EmbedResponse {
    pub model: String,
    pub embeddings: Vec<Vec<f32>>,
    /// Nanoseconds.
    pub total_duration: u64,
    pub load_duration: u64,
    pub prompt_eval_count: usize,
}

/// `POST /api/embeddings` (Ollama's legacy route).
#[derive(Debug, Deserialize, ToSchema)]
pub struct LegacyRequest {
    pub model: Option<String>,
    pub prompt: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub keep_alive: Option<Value>,
    #[allow(dead_code)]
    #[schema(value_type = Option<Object>)]
    pub options: Option<Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LegacyResponse {
    pub embedding: Vec<f32>,
}
