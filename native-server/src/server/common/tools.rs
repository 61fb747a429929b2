//! Tool (function) calling: checking the `tools` a request declares, and finding the calls in
//! the model's output.
//!
//! The tools go to the model's chat template (`tools` variable), which tells the model how to
//! call them. Templates of the Hermes / Qwen 2.5 family ask for
//! `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; that is the format parsed here.
//! A reply that is nothing but such a JSON object (optionally in a ```json fence) naming a
//! declared tool also counts as a call, since small models often drop the tags.
//!
//! Streaming: text before a call streams as content; from `<tool_call>` on (or from the start
//! when the reply opens like a bare JSON call) the text is held back and parsed at the end.
//! Held text that turns out not to be a call is sent as content then.

use serde_json::{json, Value};

use crate::server::error::ApiError;

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// A call the model made.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub name: String,
    /// The arguments object.
    pub arguments: Value,
}

/// Checks declared tools (`[{"type": "function", "function": {"name", ...}}]`) and returns
/// their names.
pub fn check_tools(tools: &[Value]) -> Result<Vec<String>, ApiError> {
    let mut names = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let kind = t.get("type").and_then(Value::as_str).unwrap_or("function");
        if kind != "function" {
            return Err(ApiError::invalid(format!(
                "tools[{i}].type must be \"function\", got {kind:?}"
            )));
        }
        let name = t
            .get("function")
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::invalid(format!("tools[{i}].function.name is required")))?;
        if let Some(p) = t.get("function").and_then(|f| f.get("parameters")) {
            if !p.is_object() {
                return Err(ApiError::invalid(format!(
                    "tools[{i}].function.parameters must be a JSON schema object"
                )));
            }
        }
        names.push(name.to_string());
    }
    Ok(names)
}

/// One `{"name": ..., "arguments": ...}` object (arguments may also come as a JSON string or
/// under `parameters`).
fn call_from_json(text: &str) -> Option<ToolCall> {
    let v: Value = serde_json::from_str(text.trim()).ok()?;
    let name = v.get("name")?.as_str()?.to_string();
    let args = v
        .get("arguments")
        .or_else(|| v.get("parameters"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let arguments = match args {
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(o @ Value::Object(_)) => o,
            _ => return None,
        },
        o @ Value::Object(_) => o,
        Value::Null => json!({}),
        _ => return None,
    };
    Some(ToolCall { name, arguments })
}

/// Strips a Markdown code fence around `text`, if any.
fn unfence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// Splits a whole reply into content and calls; None when it holds no well-formed call.
pub fn parse(text: &str, names: &[String]) -> Option<(String, Vec<ToolCall>)> {
    if let Some(first) = text.find(OPEN) {
        let mut content = text[..first].to_string();
        let mut calls = Vec::new();
        let mut rest = &text[first..];
        while let Some(start) = rest.find(OPEN) {
            content.push_str(&rest[..start]);
            let body = &rest[start + OPEN.len()..];
            let (inner, after) = match body.find(CLOSE) {
                Some(end) => (&body[..end], &body[end + CLOSE.len()..]),
                // The model ended without the closing tag: take what it wrote.
                None => (body, ""),
            };
            calls.push(call_from_json(inner)?);
            rest = after;
        }
        content.push_str(rest);
        return Some((content.trim().to_string(), calls));
    }
    // Bare JSON: one or more call objects and nothing else.
    let mut calls = Vec::new();
    for v in serde_json::Deserializer::from_str(unfence(text)).into_iter::<Value>() {
        let call = call_from_json(&v.ok()?.to_string())?;
        if !names.contains(&call.name) {
            return None;
        }
        calls.push(call);
    }
    (!calls.is_empty()).then(|| (String::new(), calls))
}

/// The tool name in a call being written (`"name": "..."` once its closing quote is there).
pub fn call_name(partial: &str) -> Option<String> {
    let rest = &partial[partial.find("\"name\"")? + 6..];
    let rest = rest
        .trim_start()
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?;
    let end = rest.find('"')?;
    Some(rest[..end].to_string())
}

/// Content and calls of a whole reply (calls parsed only when tools were offered, `names`),
/// the same split a [`ToolStream`] makes.
pub fn split(text: &str, names: Option<&[String]>) -> (String, Vec<ToolCall>) {
    match names {
        Some(n) => {
            let mut ts = ToolStream::new(n.to_vec());
            let mut out = ts.push(text);
            let (tail, calls) = ts.finish();
            out.push_str(&tail);
            (out, calls)
        }
        None => (text.to_string(), Vec::new()),
    }
}

/// Streams content while holding back anything that may be a tool call.
#[derive(Debug, Default)]
pub struct ToolStream {
    names: Vec<String>,
    held: String,
    /// Everything from here on is held (a call started, or the reply opened like one).
    holding: bool,
    started: bool,
}

impl ToolStream {
    pub fn new(names: Vec<String>) -> Self {
        ToolStream {
            names,
            ..Default::default()
        }
    }

    /// Takes generated text; returns the content that is safe to send now.
    pub fn push(&mut self, text: &str) -> String {
        self.held.push_str(text);
        if self.holding {
            return String::new();
        }
        if !self.started {
            let t = self.held.trim_start();
            if t.is_empty() {
                return String::new();
            }
            self.started = true;
            if t.starts_with('{') || t.starts_with('`') {
                self.holding = true;
                return String::new();
            }
        }
        if let Some(pos) = self.held.find(OPEN) {
            let out = self.held[..pos].to_string();
            self.held.drain(..pos);
            self.holding = true;
            return out;
        }
        // Keep a tail that could be the start of the tag.
        let keep = (1..OPEN.len())
            .rev()
            .find(|&k| self.held.ends_with(&OPEN[..k]))
            .unwrap_or(0);
        let cut = self.held.len() - keep;
        let out = self.held[..cut].to_string();
        self.held.drain(..cut);
        out
    }

    /// The text held back since a call started (None while nothing is held): what the model
    /// has written of its calls so far.
    pub fn pending_call(&self) -> Option<&str> {
        self.holding.then_some(self.held.as_str())
    }

    /// The end of the reply: remaining content and the calls found.
    pub fn finish(&mut self) -> (String, Vec<ToolCall>) {
        let held = std::mem::take(&mut self.held);
        if self.holding {
            if let Some((content, calls)) = parse(&held, &self.names) {
                return (content, calls);
            }
        }
        (held, Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["get_weather".into()]
    }

    #[test]
    fn a_call_being_written_is_held_and_named_once_its_name_is_complete() {
        let mut ts = ToolStream::new(names());
        assert_eq!(ts.push("Sure. "), "Sure. ");
        assert_eq!(ts.pending_call(), None);
        assert_eq!(ts.push("<tool_call>\n{\"name\": \"get_wea"), "");
        let held = ts.pending_call().unwrap();
        assert!(held.starts_with("<tool_call>"), "{held}");
        assert_eq!(call_name(held), None);
        ts.push("ther\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
        assert_eq!(
            call_name(ts.pending_call().unwrap()).as_deref(),
            Some("get_weather")
        );
        let (_, calls) = ts.finish();
        assert_eq!(calls[0].name, "get_weather");
    }

    #[test]
    fn tagged_calls_are_parsed_with_surrounding_content() {
        let text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>";
        let (content, calls) = parse(text, &names()).unwrap();
        assert_eq!(content, "Let me check.");
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].arguments, json!({"city": "Paris"}));
        assert_eq!(calls[1].arguments, json!({"x": 1}));
    }

    #[test]
    fn bare_calls_need_a_declared_name_and_bad_json_is_content() {
        let bare = "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n```";
        assert_eq!(parse(bare, &names()).unwrap().1[0].name, "get_weather");
        assert!(parse("{\"name\": \"other\", \"arguments\": {}}", &names()).is_none());
        let two = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"B\"}}";
        assert_eq!(parse(two, &names()).unwrap().1.len(), 2);
        assert!(parse(
            "{\"name\": \"get_weather\", \"arguments\": {}} and more",
            &names()
        )
        .is_none());
        assert!(parse("<tool_call>{not json</tool_call>", &names()).is_none());
        assert!(parse("plain text", &names()).is_none());
    }

    #[test]
    fn stream_holds_back_calls_and_tag_prefixes() {
        let mut s = ToolStream::new(names());
        assert_eq!(s.push("Sure. <tool"), "Sure. ");
        assert_eq!(s.push("_call>{\"name\": \"get_weather\", "), "");
        assert_eq!(s.push("\"arguments\": {}}</tool_call>"), "");
        let (content, calls) = s.finish();
        assert_eq!((content.as_str(), calls.len()), ("", 1));

        let mut s = ToolStream::new(names());
        assert_eq!(s.push("a <b> c"), "a <b> c");
        assert_eq!(s.finish(), (String::new(), vec![]));

        let mut s = ToolStream::new(names());
        assert_eq!(s.push("{\"a\": 1}"), "");
        assert_eq!(s.finish(), ("{\"a\": 1}".to_string(), vec![]));
    }
}
