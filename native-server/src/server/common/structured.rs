//! Structured output requests: OpenAI `response_format` and Ollama `format`, turned into the
//! JSON schema the scheduler constrains decoding to (`weft_core::sampler::JsonSchema`).

use std::sync::Arc;

use serde_json::Value;
use weft_core::sampler::JsonSchema;

use crate::server::error::ApiError;

fn compile(schema: &Value, field: &str) -> Result<Arc<JsonSchema>, ApiError> {
    JsonSchema::compile(schema)
        .map(Arc::new)
        .map_err(|e| ApiError::invalid(format!("{field}: {e}")))
}

/// OpenAI `response_format`: `{"type": "text"}`, `{"type": "json_object"}` or
/// `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`.
pub fn response_format(rf: Option<&Value>) -> Result<Option<Arc<JsonSchema>>, ApiError> {
    let Some(rf) = rf.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    match rf.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Arc::new(JsonSchema::any_object()))),
        Some("json_schema") => {
            let schema = rf
                .get("json_schema")
                .and_then(|j| j.get("schema"))
                .ok_or_else(|| {
                    ApiError::invalid("response_format.json_schema.schema is required")
                })?;
            compile(schema, "response_format.json_schema.schema").map(Some)
        }
        Some(other) => Err(ApiError::invalid(format!(
            "response_format.type {other:?} is not supported (text, json_object, json_schema)"
        ))),
        None => Err(ApiError::invalid(
            "response_format must be an object with a type",
        )),
    }
}

/// Ollama `format`: absent / `""` (free text), `"json"`, or a JSON schema object.
pub fn ollama_format(format: Option<&Value>) -> Result<Option<Arc<JsonSchema>>, ApiError> {
    match format {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) if s == "json" => Ok(Some(Arc::new(JsonSchema::any_object()))),
        Some(Value::Object(_)) => compile(format.unwrap_or(&Value::Null), "format").map(Some),
        Some(other) => Err(ApiError::invalid(format!(
            "format must be \"json\" or a JSON schema object, got {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats_map_to_schemas_and_bad_ones_are_400() {
        assert!(response_format(Some(&json!({"type": "text"})))
            .unwrap()
            .is_none());
        assert!(response_format(Some(&json!({"type": "json_object"})))
            .unwrap()
            .is_some());
        let e = response_format(Some(&json!({"type": "json_schema",
            "json_schema": {"name": "x", "schema": {"type": "string", "format": "iri"}}})))
        .unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e.message.contains("\"format\""), "{}", e.message);
        assert!(response_format(Some(&json!({"type": "json_schema"}))).is_err());
        assert!(ollama_format(Some(&json!("json"))).unwrap().is_some());
        assert!(ollama_format(Some(&json!("yaml"))).is_err());
        assert!(ollama_format(Some(&json!({"type": "object"})))
            .unwrap()
            .is_some());
    }
}
