//! A request's `input` read into conversation items, and a conversation (instructions and
//! items) turned into the chat messages the model's template renders.
//!
//! Accepted items: messages (`{"role", "content"}`, `"type": "message"` optional) with role
//! user / system / developer / assistant and content a string or `input_text` /
//! `output_text` parts, and `input_image` parts (a data URI in `image_url`) in user
//! messages; `function_call` (`call_id`, `name`, `arguments`) and `function_call_output`
//! (`call_id`, `output`). Anything else (files, images by `file_id`, item references,
//! built-in tool items) is a 400 naming where it is.

use serde_json::{Map, Value};
use weft_core::chat::{Content, ContentPart, FunctionCall, Message, ToolCall};

use super::types::{FunctionCallItem, FunctionCallOutputItem, Item, MessageItem, Part};
use crate::server::common::ids;
use crate::server::error::ApiError;

const ROLES: [&str; 4] = ["user", "system", "developer", "assistant"];

/// `input`: a string is one user message; a list holds items. `None` is a 400.
pub fn parse(input: Option<&Value>) -> Result<Vec<Item>, ApiError> {
    match input {
        None | Some(Value::Null) => Err(ApiError::invalid("input is required")),
        Some(Value::String(s)) => Ok(vec![message("user", vec![input_text(s)])]),
        Some(Value::Array(items)) if items.is_empty() => {
            Err(ApiError::invalid("input must not be empty"))
        }
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| item(v, &format!("input[{i}]")))
            .collect(),
        Some(_) => Err(ApiError::invalid(
            "input must be a string or a list of input items",
        )),
    }
}

/// Items read back from their own JSON (a stored response's input and output): read as
/// `input` is, keeping their ids and an `incomplete` status.
pub fn items(values: &[Value], at: &str) -> Result<Vec<Item>, ApiError> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut it = item(v, &format!("{at}[{i}]"))?;
            if v.get("status").and_then(Value::as_str) == Some("incomplete") {
                if let Item::Message(m) = &mut it {
                    m.status = "incomplete";
                }
            }
            Ok(it)
        })
        .collect()
}

/// A new message item with a fresh id.
pub fn message(role: &str, content: Vec<Part>) -> Item {
    message_with(format!("msg_{}", ids::unique()), role, content)
}

fn message_with(id: String, role: &str, content: Vec<Part>) -> Item {
    Item::Message(MessageItem {
        id,
        role: role.to_string(),
        status: "completed",
        content,
    })
}

fn input_text(s: &str) -> Part {
    Part::InputText { text: s.into() }
}

/// Assistant text, as output parts are.
pub fn output_text(s: &str) -> Part {
    Part::OutputText {
        text: s.into(),
        annotations: Vec::new(),
    }
}

/// A string field of an item object; 400 naming it when missing or not a string.
fn text_field<'a>(o: &'a Map<String, Value>, key: &str, at: &str) -> Result<&'a str, ApiError> {
    match o.get(key) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(ApiError::invalid(format!("{at}.{key} is required"))),
        Some(_) => Err(ApiError::invalid(format!("{at}.{key} must be a string"))),
    }
}

/// The client's id for the item, or a fresh one with `prefix`.
fn id_of(o: &Map<String, Value>, prefix: &str) -> String {
    match o.get("id").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => format!("{prefix}_{}", ids::unique()),
    }
}

fn item(v: &Value, at: &str) -> Result<Item, ApiError> {
    let o = v
        .as_object()
        .ok_or_else(|| ApiError::invalid(format!("{at} must be an object")))?;
    let kind = match o.get("type") {
        None | Some(Value::Null) => "message",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err(ApiError::invalid(format!("{at}.type must be a string"))),
    };
    match kind {
        "message" => {
            let role = text_field(o, "role", at)?;
            if !ROLES.contains(&role) {
                return Err(ApiError::invalid(format!(
                    "{at}.role {role:?} is not one of {}",
                    ROLES.join(", ")
                )));
            }
            let content = content(o.get("content"), role, &format!("{at}.content"))?;
            Ok(message_with(id_of(o, "msg"), role, content))
        }
        "function_call" => {
            let arguments = text_field(o, "arguments", at)?;
            if !matches!(serde_json::from_str(arguments), Ok(Value::Object(_))) {
                return Err(ApiError::invalid(format!(
                    "{at}.arguments must be a JSON object encoded as a string"
                )));
            }
            Ok(Item::FunctionCall(FunctionCallItem {
                id: id_of(o, "fc"),
                call_id: text_field(o, "call_id", at)?.to_string(),
                name: text_field(o, "name", at)?.to_string(),
                arguments: arguments.to_string(),
                status: "completed",
            }))
        }
        "function_call_output" => Ok(Item::FunctionCallOutput(FunctionCallOutputItem {
            id: id_of(o, "fco"),
            call_id: text_field(o, "call_id", at)?.to_string(),
            output: call_output(o.get("output"), &format!("{at}.output"))?,
            status: "completed",
        })),
        other => Err(ApiError::invalid(format!(
            "{at}.type {other:?} is not supported (message, function_call, function_call_output)"
        ))),
    }
}

/// Text parts of a list (`input_text` / `output_text`, and `refusal` as text): anything else
/// is refused.
fn text_parts(parts: &[Value], at: &str) -> Result<Vec<String>, ApiError> {
    parts
        .iter()
        .enumerate()
        .map(|(j, p)| text_part(p, &format!("{at}[{j}]")))
        .collect()
}

/// One text part's text (see [`text_parts`]); `at` names it in errors.
fn text_part(p: &Value, at: &str) -> Result<String, ApiError> {
    let o = p
        .as_object()
        .ok_or_else(|| ApiError::invalid(format!("{at} must be an object")))?;
    match o.get("type").and_then(Value::as_str) {
        Some("input_text" | "output_text") => Ok(text_field(o, "text", at)?.to_string()),
        Some("refusal") => Ok(text_field(o, "refusal", at)?.to_string()),
        Some(other) => Err(ApiError::invalid(format!(
            "{at}.type {other:?} is not supported here (input_text, output_text; input_image in user messages)"
        ))),
        None => Err(ApiError::invalid(format!("{at}.type is required"))),
    }
}

/// An `input_image` part: its `image_url` must be there (a data URI; the image bounds check
/// it when the prompt is built); `file_id` is refused, as there is no files API.
fn image_part(o: &Map<String, Value>, at: &str) -> Result<Part, ApiError> {
    if o.get("file_id").is_some_and(|v| !v.is_null()) {
        return Err(ApiError::invalid(format!(
            "{at}.file_id is not supported: send the image in image_url as a data URI"
        )));
    }
    let detail = match o.get("detail") {
        None | Some(Value::Null) => "auto",
        Some(Value::String(d)) if ["auto", "low", "high"].contains(&d.as_str()) => d,
        Some(_) => {
            return Err(ApiError::invalid(format!(
                "{at}.detail must be \"auto\", \"low\" or \"high\""
            )))
        }
    };
    Ok(Part::InputImage {
        image_url: text_field(o, "image_url", at)?.to_string(),
        detail: detail.to_string(),
    })
}

/// A user message's parts: text and images in order.
fn user_parts(parts: &[Value], at: &str) -> Result<Vec<Part>, ApiError> {
    parts
        .iter()
        .enumerate()
        .map(|(j, p)| {
            let at = format!("{at}[{j}]");
            match p.as_object() {
                Some(o) if o.get("type").and_then(Value::as_str) == Some("input_image") => {
                    image_part(o, &at)
                }
                _ => Ok(input_text(&text_part(p, &at)?)),
            }
        })
        .collect()
}

/// A message's content as parts of the kind its role has.
fn content(v: Option<&Value>, role: &str, at: &str) -> Result<Vec<Part>, ApiError> {
    let texts = match v {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(parts)) if role == "user" => return user_parts(parts, at),
        Some(Value::Array(parts)) => text_parts(parts, at)?,
        None | Some(Value::Null) => return Err(ApiError::invalid(format!("{at} is required"))),
        Some(_) => {
            return Err(ApiError::invalid(format!(
                "{at} must be a string or a list of content parts"
            )))
        }
    };
    let part = if role == "assistant" {
        output_text
    } else {
        input_text
    };
    Ok(texts.iter().map(|t| part(t)).collect())
}

/// A call's output: a string, or text parts (joined).
fn call_output(v: Option<&Value>, at: &str) -> Result<String, ApiError> {
    match v {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => Ok(text_parts(parts, at)?.join("\n")),
        None | Some(Value::Null) => Err(ApiError::invalid(format!("{at} is required"))),
        Some(_) => Err(ApiError::invalid(format!(
            "{at} must be a string or a list of content parts"
        ))),
    }
}

/// The chat messages of a conversation: `instructions` as the first system message, then the
/// items in order. Developer messages become system messages (chat templates know no other
/// role for them). A `function_call` joins the assistant message right before it (the way the
/// model wrote text and calls in one turn), so a continued conversation renders as the model's
/// own turn did and its prompt starts with the same tokens.
pub fn to_messages(instructions: Option<&str>, items: &[Item]) -> Vec<Message> {
    let mut out: Vec<Message> = instructions.map(Message::system).into_iter().collect();
    for it in items {
        match it {
            Item::Message(m) => {
                let role = if m.role == "developer" {
                    "system"
                } else {
                    &m.role
                };
                out.push(message_of(role, &m.content));
            }
            Item::FunctionCall(c) => {
                let call = ToolCall {
                    id: Some(c.call_id.clone()),
                    kind: "function".into(),
                    function: FunctionCall {
                        name: c.name.clone(),
                        arguments: Value::String(c.arguments.clone()),
                    },
                };
                match out.last_mut() {
                    Some(last) if last.role == "assistant" => {
                        last.tool_calls.get_or_insert_with(Vec::new).push(call)
                    }
                    _ => out.push(Message {
                        role: "assistant".into(),
                        tool_calls: Some(vec![call]),
                        ..Default::default()
                    }),
                }
            }
            Item::FunctionCallOutput(r) => {
                let name = items.iter().find_map(|i| match i {
                    Item::FunctionCall(c) if c.call_id == r.call_id => Some(c.name.clone()),
                    _ => None,
                });
                out.push(Message {
                    tool_call_id: Some(r.call_id.clone()),
                    name,
                    ..Message::new("tool", r.output.clone())
                });
            }
        }
    }
    out
}

/// A chat message of parts: their texts joined by newlines, or, when an image is among them,
/// chat-completions parts (`text`, `image_url`) for the image path to take out.
fn message_of(role: &str, parts: &[Part]) -> Message {
    if !parts.iter().any(|p| matches!(p, Part::InputImage { .. })) {
        let text: Vec<&str> = parts.iter().map(Part::text).collect();
        return Message::new(role, text.join("\n"));
    }
    let parts = parts
        .iter()
        .map(|p| match p {
            Part::InputImage { image_url, detail } => ContentPart {
                kind: "image_url".into(),
                text: None,
                extra: serde_json::json!({"image_url": {"url": image_url, "detail": detail}})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            },
            other => ContentPart {
                kind: "text".into(),
                text: Some(other.text().to_string()),
                extra: Map::new(),
            },
        })
        .collect();
    Message {
        content: Some(Content::Parts(parts)),
        ..Message::new(role, String::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roles_and_text(ms: &[Message]) -> Vec<(String, Option<String>)> {
        ms.iter()
            .map(|m| (m.role.clone(), m.text().unwrap()))
            .collect()
    }

    #[test]
    fn a_string_is_one_user_message_after_the_instructions() {
        let items = parse(Some(&json!("Hi"))).unwrap();
        let ms = to_messages(Some("Be brief."), &items);
        assert_eq!(
            roles_and_text(&ms),
            vec![
                ("system".into(), Some("Be brief.".into())),
                ("user".into(), Some("Hi".into()))
            ]
        );
        assert!(matches!(&items[0], Item::Message(m) if m.id.starts_with("msg_")));
    }

    #[test]
    fn items_become_messages_with_calls_joined_to_the_assistant_turn() {
        let input = json!([
            {"role": "developer", "content": "Use tools."},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Weather in"}, {"type": "input_text", "text": "Paris?"}]},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
            {"type": "function_call", "id": "fc_given", "call_id": "c2", "name": "get_time", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "18C"},
        ]);
        let items = parse(Some(&input)).unwrap();
        assert!(matches!(&items[4], Item::FunctionCall(c) if c.id == "fc_given"));
        assert!(
            matches!(&items[2], Item::Message(m) if matches!(m.content[0], Part::OutputText { .. }))
        );
        let ms = to_messages(None, &items);
        assert_eq!(
            roles_and_text(&ms),
            vec![
                ("system".into(), Some("Use tools.".into())),
                ("user".into(), Some("Weather in\nParis?".into())),
                ("assistant".into(), Some("Checking.".into())),
                ("tool".into(), Some("18C".into())),
            ]
        );
        let calls = ms[2].tool_calls.as_ref().unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].id.as_deref(), Some("c1"));
        assert_eq!(calls[0].function.arguments, json!("{\"city\":\"Paris\"}"));
        assert_eq!(ms[3].tool_call_id.as_deref(), Some("c1"));
        assert_eq!(ms[3].name.as_deref(), Some("get_weather"));
        // A call with no assistant text before it is an assistant message of its own.
        let lone = parse(Some(&json!([
            {"role": "user", "content": "x"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
        ])))
        .unwrap();
        let ms = to_messages(None, &lone);
        assert_eq!(
            (ms[1].role.as_str(), ms[1].content.is_none()),
            ("assistant", true)
        );
    }

    #[test]
    fn input_images_stay_in_place_as_image_url_parts() {
        let got = parse(Some(&json!([{"role": "user", "content": [
            {"type": "input_text", "text": "Look:"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            {"type": "input_text", "text": "What is it?"},
        ]}])))
        .unwrap();
        let Item::Message(m) = &got[0] else {
            panic!("{got:?}")
        };
        assert_eq!(
            m.content[1],
            Part::InputImage {
                image_url: "data:image/png;base64,AAAA".into(),
                detail: "auto".into()
            }
        );
        let ms = to_messages(None, &got);
        let Some(Content::Parts(parts)) = &ms[0].content else {
            panic!("{ms:?}")
        };
        let kinds: Vec<&str> = parts.iter().map(|p| p.kind.as_str()).collect();
        assert_eq!(kinds, ["text", "image_url", "text"]);
        assert_eq!(
            parts[1].extra["image_url"]["url"],
            json!("data:image/png;base64,AAAA")
        );
        // As stored: the part reads back the same.
        let stored = serde_json::to_value(&got[0]).unwrap();
        assert_eq!(stored["content"][1]["type"], "input_image");
        assert_eq!(items(&[stored], "input").unwrap(), got);
    }

    #[test]
    fn bad_input_is_a_400_naming_the_place() {
        let cases = [
            (None, "input is required"),
            (Some(json!(3)), "input must be"),
            (Some(json!([])), "must not be empty"),
            (Some(json!(["hi"])), "input[0] must be an object"),
            (
                Some(json!([{"role": "robot", "content": "x"}])),
                "input[0].role",
            ),
            (
                Some(json!([{"role": "user"}])),
                "input[0].content is required",
            ),
            (
                Some(
                    json!([{"role": "assistant", "content": [{"type": "input_image", "image_url": "x"}]}]),
                ),
                "input[0].content[0].type \"input_image\"",
            ),
            (
                Some(
                    json!([{"role": "user", "content": [{"type": "input_text", "text": "x"}, {"type": "input_image", "file_id": "f"}]}]),
                ),
                "input[0].content[1].file_id is not supported",
            ),
            (
                Some(json!([{"role": "user", "content": [{"type": "input_image"}]}])),
                "input[0].content[0].image_url is required",
            ),
            (
                Some(
                    json!([{"role": "user", "content": [{"type": "input_image", "image_url": "x", "detail": "max"}]}]),
                ),
                "input[0].content[0].detail",
            ),
            (
                Some(
                    json!([{"role": "user", "content": [{"type": "input_file", "file_data": "x"}]}]),
                ),
                "input[0].content[0].type \"input_file\"",
            ),
            (
                Some(
                    json!([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"}]),
                ),
                "input[0].arguments",
            ),
            (
                Some(json!([{"type": "function_call_output", "output": "x"}])),
                "input[0].call_id is required",
            ),
            (
                Some(json!([{"type": "item_reference", "id": "x"}])),
                "\"item_reference\" is not supported",
            ),
        ];
        for (input, want) in cases {
            let e = parse(input.as_ref()).unwrap_err();
            assert_eq!(e.status, 400);
            assert!(e.message.contains(want), "{input:?}: {}", e.message);
        }
    }
}
