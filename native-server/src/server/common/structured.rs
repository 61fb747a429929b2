//! Structured output requests: OpenAI `response_format` (and the Responses API's
//! `text.format`) and Ollama `format`, turned into the JSON schema the scheduler constrains
//! decoding to (`weft_core::sampler::JsonSchema`).

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
    let schema = rf.get("json_schema").and_then(|j| j.get("schema"));
    typed(
        rf,
        schema,
        "response_format",
        "response_format.json_schema.schema",
    )
}

/// The Responses API's `text.format`: the same three types, the schema's fields flat
/// (`{"type": "json_schema", "name", "schema", "strict"}`).
pub fn text_format(text: Option<&Value>) -> Result<Option<Arc<JsonSchema>>, ApiError> {
    let text = match text {
        None | Some(Value::Null) => return Ok(None),
        Some(t @ Value::Object(_)) => t,
        Some(_) => return Err(ApiError::invalid("text must be an object")),
    };
    let Some(f) = text.get("format").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    typed(f, f.get("schema"), "text.format", "text.format.schema")
}

/// A format object by its `type`; `field` and `schema_field` name it and its schema in errors.
fn typed(
    f: &Value,
    schema: Option<&Value>,
    field: &str,
    schema_field: &str,
) -> Result<Option<Arc<JsonSchema>>, ApiError> {
    match f.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Arc::new(JsonSchema::any_object()))),
        Some("json_schema") => {
            let schema =
                schema.ok_or_else(|| ApiError::invalid(format!("{schema_field} is required")))?;
            compile(schema, schema_field).map(Some)
        }
        Some(other) => Err(ApiError::invalid(format!(
            "{field}.type {other:?} is not supported (text, json_object, json_schema)"
        ))),
        None => Err(ApiError::invalid(format!(
            "{field} must be an object with a type"
        ))),
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
        let flat =
            json!({"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}});
        assert!(text_format(Some(&flat)).unwrap().is_some());
        assert!(text_format(Some(&json!({"format": {"type": "text"}})))
            .unwrap()
            .is_none());
        let e = text_format(Some(&json!({"format": {"type": "json_schema"}}))).unwrap_err();
        assert!(e.message.contains("text.format.schema"), "{}", e.message);
        assert!(text_format(Some(&json!("json"))).is_err());
        assert!(ollama_format(Some(&json!("json"))).unwrap().is_some());
        assert!(ollama_format(Some(&json!("yaml"))).is_err());
        assert!(ollama_format(Some(&json!({"type": "object"})))
            .unwrap()
            .is_some());
    }
}
