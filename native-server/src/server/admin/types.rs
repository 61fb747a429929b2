//! Bodies of the admin plane's model routes (camelCase, as the peer documents them).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// A model by name, with an optional keep-alive.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelBody {
    #[serde(alias = "name", alias = "modelName")]
    pub model: Option<String>,
    #[serde(alias = "keep_alive")]
    #[schema(value_type = Option<Object>)]
    pub keep_alive: Option<Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Loaded {
    pub ok: bool,
    pub model: String,
    pub loaded: bool,
    pub backend: String,
    pub seconds: f64,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Unloaded {
    pub ok: bool,
    pub model: String,
    pub was_loaded: bool,
}

/// One known name in `/api/v1/models/library`; the file's facts are absent when it is broken.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LibraryEntry {
    pub name: String,
    /// The model's file name (relative to the models directory; never an absolute path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantization: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameter_size: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_at: Option<String>,
    /// `command_line`, `models_dir` or `created`.
    pub origin: Option<&'static str>,
    pub alias_of: Option<String>,
    pub broken: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub has_overrides: Option<bool>,
    pub loaded: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Library {
    pub models: Vec<LibraryEntry>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct AliasRequest {
    pub alias: Option<String>,
    #[serde(alias = "target")]
    pub model: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AliasResponse {
    pub ok: bool,
    pub alias: String,
    pub model: String,
}

/// A name's Modelfile and its own system prompt, template and parameters.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelfileResponse {
    pub model: String,
    pub modelfile: String,
    pub system: Option<String>,
    pub template: Option<String>,
    #[schema(value_type = Object)]
    pub parameters: Map<String, Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelfileRequest {
    pub system: Option<String>,
    pub template: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Map<String, Value>>,
}
