//! OpenAI `tool_choice`: whether the model may, must, or must not call a tool, or which one.
//!
//! "auto" (the default) and "none" only decide which tools the chat template shows. "required"
//! and a named function (`{"type": "function", "function": {"name": ...}}`) force a call:
//! the reply is opened with the template's call tag (`<tool_call>\n` for the Hermes / Qwen 2.5
//! family, written into the prompt as the start of the assistant turn) and decoding is
//! constrained to one `{"name": ..., "arguments": {...}}` object whose name is an allowed tool
//! and whose arguments follow that tool's `parameters` schema. Generation stops when the
//! object is complete, and [`super::tools`] parses it as a call like any other.

use std::sync::Arc;

use serde_json::Value;
use weft_core::sampler::JsonSchema;

use crate::server::error::ApiError;
use crate::server::leased::Leased;

/// What `tool_choice` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tools are offered.
    None,
    /// The model must call one of the tools.
    Required,
    /// The model must call this tool.
    Function(String),
}

/// Parses `tool_choice` (absent or null is "auto").
pub fn parse(v: Option<&Value>) -> Result<ToolChoice, ApiError> {
    let bad = |what: String| {
        ApiError::invalid(format!(
            "tool_choice {what} is not supported: use \"auto\", \"none\", \"required\" or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"
        ))
    };
    match v {
        None | Some(Value::Null) => Ok(ToolChoice::Auto),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(bad(format!("{other:?}"))),
        },
        Some(Value::Object(o)) => {
            let kind = o.get("type").and_then(Value::as_str).unwrap_or("function");
            if kind != "function" {
                return Err(bad(format!("of type {kind:?}")));
            }
            // Chat Completions nests the name under `function`; the Responses API does not.
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| o.get("name"))
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| ApiError::invalid("tool_choice.function.name is required"))?;
            Ok(ToolChoice::Function(name.to_string()))
        }
        Some(other) => Err(bad(other.to_string())),
    }
}

/// The tools a request offers the model.
pub struct Offered {
    /// Definitions in the chat-completions shape (for the chat template).
    pub defs: Vec<Value>,
    pub names: Vec<String>,
    /// `tool_choice` "required" or a named function: the call the reply must be.
    pub forced: Option<ForcedCall>,
}

/// The tools to offer the model on `m` (`tool_choice` "none" offers none), and the call to
/// force; `defs` are checked (400 on a malformed tool).
pub fn offer(
    choice: Option<&Value>,
    defs: Vec<Value>,
    m: &Leased,
) -> Result<Option<Offered>, ApiError> {
    let choice = parse(choice)?;
    let names = super::tools::check_tools(&defs)?;
    let template = m.template().map_or("", |t| t.source());
    let forced = forced_call(&choice, &defs, &names, template)?;
    if defs.is_empty() || choice == ToolChoice::None {
        return Ok(None);
    }
    Ok(Some(Offered {
        defs,
        names,
        forced,
    }))
}

/// A call the reply must be.
#[derive(Clone, Debug)]
pub struct ForcedCall {
    /// The call object's schema (decoding is constrained to it).
    pub schema: Arc<JsonSchema>,
    /// Text that opens the call in the template's syntax, written at the start of the reply.
    pub opening: &'static str,
}

/// The call to force for `choice` over the declared `tools` (checked, with their `names`), in
/// the syntax of the chat template `template` (its source); None when nothing is forced.
/// A named function that is not among the tools, a forcing choice without tools, or a
/// `parameters` schema the constraint cannot enforce is a 400.
pub fn forced_call(
    choice: &ToolChoice,
    tools: &[Value],
    names: &[String],
    template: &str,
) -> Result<Option<ForcedCall>, ApiError> {
    let wanted: Vec<usize> = match choice {
        ToolChoice::Auto | ToolChoice::None => return Ok(None),
        _ if tools.is_empty() => {
            return Err(ApiError::invalid(
                "tool_choice \"required\" or a named function needs tools",
            ))
        }
        ToolChoice::Required => (0..tools.len()).collect(),
        ToolChoice::Function(name) => match names.iter().position(|n| n == name) {
            Some(i) => vec![i],
            None => {
                return Err(ApiError::invalid(format!(
                "tool_choice names the function {name:?}, which is not among the tools given ({})",
                names.join(", ")
            )))
            }
        },
    };
    let calls: Vec<(String, Option<Value>)> = wanted
        .into_iter()
        .map(|i| {
            let params = tools[i].get("function").and_then(|f| f.get("parameters"));
            (names[i].clone(), params.cloned())
        })
        .collect();
    let schema = JsonSchema::tool_call(&calls).map_err(|e| {
        ApiError::invalid(format!(
            "tool_choice forces a call whose arguments follow the tool's parameters schema, and it cannot be enforced: {e}"
        ))
    })?;
    Ok(Some(ForcedCall {
        schema: Arc::new(schema),
        opening: opening(template),
    }))
}

/// How the template's model opens a tool call: Hermes / Qwen 2.5 templates ask for
/// `<tool_call>` tags; with any other template the call is a bare JSON object (which
/// [`super::tools::parse`] also reads as a call).
fn opening(template: &str) -> &'static str {
    if template.contains("<tool_call>") {
        "<tool_call>\n"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> (Vec<Value>, Vec<String>) {
        let t = vec![
            json!({"type": "function", "function": {"name": "a",
                "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}),
            json!({"type": "function", "function": {"name": "b"}}),
        ];
        (t, vec!["a".into(), "b".into()])
    }

    #[test]
    fn choices_parse_and_bad_ones_are_400() {
        assert_eq!(parse(None).unwrap(), ToolChoice::Auto);
        assert_eq!(parse(Some(&json!("none"))).unwrap(), ToolChoice::None);
        assert_eq!(
            parse(Some(&json!("required"))).unwrap(),
            ToolChoice::Required
        );
        let named = json!({"type": "function", "function": {"name": "a"}});
        assert_eq!(
            parse(Some(&named)).unwrap(),
            ToolChoice::Function("a".into())
        );
        assert_eq!(
            parse(Some(&json!({"type": "function", "name": "b"}))).unwrap(),
            ToolChoice::Function("b".into())
        );
        for bad in [
            json!("always"),
            json!({"type": "custom"}),
            json!({"type": "function"}),
            json!(3),
        ] {
            assert_eq!(parse(Some(&bad)).unwrap_err().status, 400, "{bad}");
        }
    }

    #[test]
    fn forcing_needs_a_declared_tool_and_uses_the_template_syntax() {
        let (t, n) = tools();
        assert!(forced_call(&ToolChoice::Auto, &t, &n, "")
            .unwrap()
            .is_none());
        let e = forced_call(&ToolChoice::Function("c".into()), &t, &n, "").unwrap_err();
        assert_eq!(e.status, 400);
        assert!(
            e.message.contains("\"c\"") && e.message.contains("a, b"),
            "{}",
            e.message
        );
        assert!(forced_call(&ToolChoice::Required, &[], &[], "").is_err());
        let f = forced_call(&ToolChoice::Function("a".into()), &t, &n, "x <tool_call> y")
            .unwrap()
            .unwrap();
        assert_eq!(f.opening, "<tool_call>\n");
        let f = forced_call(&ToolChoice::Required, &t, &n, "{{ messages }}")
            .unwrap()
            .unwrap();
        assert_eq!(f.opening, "");
        let bad = vec![json!({"type": "function", "function": {"name": "a",
            "parameters": {"type": "object", "properties": {"x": {"type": "array", "uniqueItems": true}}}}})];
        let e = forced_call(&ToolChoice::Required, &bad, &["a".into()], "").unwrap_err();
        assert!(e.message.contains("uniqueItems"), "{}", e.message);
    }
}
