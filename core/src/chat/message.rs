//! Chat messages in the OpenAI JSON shape, and their conversion into what templates expect.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::ChatError;

/// One chat message. Deserializes from (and serializes to) OpenAI chat-completion message JSON:
/// `{"role": "user", "content": "..."}`, with optional `tool_calls`, `tool_call_id`, `name`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    /// A string, an array of content parts, or absent/null (assistant messages that only call
    /// tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    /// A message with plain text content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            role: role.into(),
            content: Some(Content::Text(content.into())),
            ..Default::default()
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::new("system", content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new("assistant", content)
    }

    /// The text of the content: a string as is, text parts joined by `"\n"`.
    /// Fails on non-text parts (images, audio), which no text model can take.
    pub fn text(&self) -> Result<Option<String>, ChatError> {
        match &self.content {
            None => Ok(None),
            Some(Content::Text(s)) => Ok(Some(s.clone())),
            Some(Content::Parts(parts)) => {
                let mut texts = Vec::with_capacity(parts.len());
                for p in parts {
                    match (p.kind.as_str(), &p.text) {
                        ("text", Some(t)) => texts.push(t.as_str()),
                        ("text", None) => {
                            return Err(ChatError::Input(
                                "a content part of type \"text\" has no \"text\" field".into(),
                            ))
                        }
                        (other, _) => {
                            return Err(ChatError::Input(format!(
                                "content parts of type {other:?} are not supported (only \"text\")"
                            )))
                        }
                    }
                }
                Ok(Some(texts.join("\n")))
            }
        }
    }

    /// The message as a chat template sees it (the dictionary `transformers` would pass):
    /// content flattened to a string, absent fields left out (so `is defined` tests behave as in
    /// Python), and tool-call arguments given as a JSON string decoded into an object, since
    /// templates write them with `| tojson` and expect a mapping.
    pub fn to_template_json(&self) -> Result<Json, ChatError> {
        let mut m = Map::new();
        m.insert("role".into(), Json::String(self.role.clone()));
        match self.text()? {
            Some(t) => {
                m.insert("content".into(), Json::String(t));
            }
            // OpenAI allows a null content next to tool calls; templates test it for truth.
            None if self.tool_calls.is_some() => {
                m.insert("content".into(), Json::Null);
            }
            None => {}
        }
        if let Some(calls) = &self.tool_calls {
            let calls = calls.iter().map(ToolCall::to_template_json).collect();
            m.insert("tool_calls".into(), Json::Array(calls));
        }
        if let Some(id) = &self.tool_call_id {
            m.insert("tool_call_id".into(), Json::String(id.clone()));
        }
        if let Some(name) = &self.name {
            m.insert("name".into(), Json::String(name.clone()));
        }
        Ok(Json::Object(m))
    }
}

/// Message content: a string or a list of typed parts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// One content part, e.g. `{"type": "text", "text": "..."}`. Other part types deserialize (their
/// extra fields are kept) but are refused when rendering.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Json>,
}

/// A tool call made by the assistant: `{"id", "type": "function", "function": {"name",
/// "arguments"}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function_kind() -> String {
    "function".into()
}

/// The function named by a tool call. `arguments` is a JSON-encoded string in OpenAI's API, or
/// an object in Hugging Face's message format; both are accepted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    #[serde(default)]
    pub arguments: Json,
}

impl ToolCall {
    fn to_template_json(&self) -> Json {
        let arguments = match &self.function.arguments {
            Json::String(s) => match serde_json::from_str::<Json>(s) {
                Ok(v @ Json::Object(_)) => v,
                _ => Json::String(s.clone()),
            },
            other => other.clone(),
        };
        let mut f = Map::new();
        f.insert("name".into(), Json::String(self.function.name.clone()));
        f.insert("arguments".into(), arguments);
        let mut m = Map::new();
        if let Some(id) = &self.id {
            m.insert("id".into(), Json::String(id.clone()));
        }
        m.insert("type".into(), Json::String(self.kind.clone()));
        m.insert("function".into(), Json::Object(f));
        Json::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_json_round_trips() {
        let j = json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "f", "arguments": "{\"x\": 1}"}}]
        });
        let m: Message = serde_json::from_value(j).unwrap();
        assert_eq!(m.content, None);
        let t = m.to_template_json().unwrap();
        assert_eq!(
            t,
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}
            ]})
        );
    }

    #[test]
    fn text_parts_join_and_images_are_refused() {
        let m: Message = serde_json::from_value(json!({"role": "user", "content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}))
        .unwrap();
        assert_eq!(m.text().unwrap().as_deref(), Some("a\nb"));
        let m: Message = serde_json::from_value(json!({"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "x"}}]}))
        .unwrap();
        let e = m.to_template_json().unwrap_err().to_string();
        assert!(e.contains("image_url"), "{e}");
    }

    #[test]
    fn absent_fields_stay_absent() {
        let t = Message::user("hi").to_template_json().unwrap();
        assert_eq!(t, json!({"role": "user", "content": "hi"}));
    }
}
