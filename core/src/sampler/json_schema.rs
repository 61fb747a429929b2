//! JSON Schema subset for constrained decoding, compiled into a small graph of nodes that
//! [`JsonAcceptor`](super::JsonAcceptor) walks byte by byte.
//!
//! Supported: `type` (one name or a list), `properties`, `required`, `additionalProperties`
//! (bool or schema), `items`, `minItems`, `maxItems`, `enum`, `const`, `anyOf` / `oneOf`
//! (both as "any of": exclusivity is not enforced), `$ref` to `#/$defs/...` or
//! `#/definitions/...`, and annotations that do not constrain (`title`, `description`,
//! `default`, `examples`, `$schema`, `$id`, `$comment`, `strict`, ...). Any other keyword is an
//! error naming it, so a caller can answer 400 instead of silently ignoring a constraint.
//!
//! An object schema with `properties` and no `additionalProperties` allows no other keys (as
//! llama.cpp and OpenAI's strict mode do); without `properties` any key is allowed.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// A node of the compiled schema.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    /// Any JSON value.
    Any,
    Object {
        props: Vec<(String, u32)>,
        /// Indices into `props` that must be present before `}`.
        required: Vec<usize>,
        /// Schema of keys not in `props`; `None` forbids them.
        additional: Option<u32>,
    },
    Array {
        items: u32,
        min: usize,
        max: Option<usize>,
    },
    String,
    /// `integer` when true (no fraction, no exponent).
    Number(bool),
    /// Exactly this JSON text (compact serialization): `true`, `null`, an `enum` member, ...
    Literal(Vec<u8>),
    /// Any one of these nodes.
    Union(Vec<u32>),
}

/// Node ids every schema has.
pub(crate) const ANY: u32 = 0;
pub(crate) const ANY_OBJECT: u32 = 1;
pub(crate) const ANY_ARRAY: u32 = 2;
pub(crate) const TRUE: u32 = 3;
pub(crate) const FALSE: u32 = 4;
pub(crate) const NULL: u32 = 5;

/// A compiled schema (or "any JSON object" for `json_object` mode).
#[derive(Clone, Debug, PartialEq)]
pub struct JsonSchema {
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: u32,
}

/// Keywords that only annotate.
const IGNORED: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "strict",
    "$defs",
    "definitions",
];

impl JsonSchema {
    fn base() -> Vec<Node> {
        vec![
            Node::Any,
            Node::Object {
                props: Vec::new(),
                required: Vec::new(),
                additional: Some(ANY),
            },
            Node::Array {
                items: ANY,
                min: 0,
                max: None,
            },
            Node::Literal(b"true".to_vec()),
            Node::Literal(b"false".to_vec()),
            Node::Literal(b"null".to_vec()),
        ]
    }

    /// Any JSON object (OpenAI `json_object`, Ollama `format: "json"`).
    pub fn any_object() -> JsonSchema {
        JsonSchema {
            nodes: Self::base(),
            root: ANY_OBJECT,
        }
    }

    /// Any JSON value.
    pub fn any_value() -> JsonSchema {
        JsonSchema {
            nodes: Self::base(),
            root: ANY,
        }
    }

    /// Compiles a schema; the error names the unsupported keyword or the bad value.
    pub fn compile(schema: &Value) -> Result<JsonSchema, String> {
        let mut c = Compiler {
            nodes: Self::base(),
            root: schema,
            refs: HashMap::new(),
        };
        let root = c.node(schema, "#")?;
        Ok(JsonSchema {
            nodes: c.nodes,
            root,
        })
    }

    /// One tool call, `{"name": NAME, "arguments": ARGS}`, for any of `tools` (name, and its
    /// `parameters` schema; `None` means any object): what a forced tool call (OpenAI
    /// `tool_choice`) constrains the reply to. Each parameters schema is compiled on its own,
    /// so its `$ref`s resolve against its own `$defs`. The error names the tool.
    pub fn tool_call(tools: &[(String, Option<Value>)]) -> Result<JsonSchema, String> {
        if tools.is_empty() {
            return Err("no tools to call".into());
        }
        let mut nodes = Self::base();
        let mut calls = Vec::new();
        for (name, params) in tools {
            let args = match params {
                None => ANY_OBJECT,
                Some(p) => {
                    let mut c = Compiler {
                        nodes: std::mem::take(&mut nodes),
                        root: p,
                        refs: HashMap::new(),
                    };
                    let id = c
                        .node(p, "#")
                        .map_err(|e| format!("tool {name:?} parameters: {e}"))?;
                    nodes = c.nodes;
                    id
                }
            };
            nodes.push(Node::Literal(
                Value::from(name.as_str()).to_string().into_bytes(),
            ));
            let name_id = (nodes.len() - 1) as u32;
            nodes.push(Node::Object {
                props: vec![("name".into(), name_id), ("arguments".into(), args)],
                required: vec![0, 1],
                additional: None,
            });
            calls.push((nodes.len() - 1) as u32);
        }
        let root = if calls.len() == 1 {
            calls[0]
        } else {
            nodes.push(Node::Union(calls));
            (nodes.len() - 1) as u32
        };
        Ok(JsonSchema { nodes, root })
    }
}

struct Compiler<'a> {
    nodes: Vec<Node>,
    root: &'a Value,
    refs: HashMap<String, u32>,
}

impl Compiler<'_> {
    fn push(&mut self, n: Node) -> u32 {
        self.nodes.push(n);
        (self.nodes.len() - 1) as u32
    }

    fn literal(&mut self, v: &Value) -> u32 {
        self.push(Node::Literal(v.to_string().into_bytes()))
    }

    fn node(&mut self, s: &Value, at: &str) -> Result<u32, String> {
        let obj = match s {
            Value::Bool(true) => return Ok(ANY),
            Value::Bool(false) => {
                return Err(format!("schema at {at} is `false` (matches nothing)"))
            }
            Value::Object(o) => o,
            _ => return Err(format!("schema at {at} must be an object")),
        };
        for k in obj.keys() {
            let known = matches!(
                k.as_str(),
                "type"
                    | "properties"
                    | "required"
                    | "additionalProperties"
                    | "items"
                    | "minItems"
                    | "maxItems"
                    | "enum"
                    | "const"
                    | "anyOf"
                    | "oneOf"
                    | "$ref"
            ) || IGNORED.contains(&k.as_str());
            if !known {
                return Err(format!(
                    "JSON schema keyword {k:?} (at {at}) is not supported; supported: type, properties, required, additionalProperties, items, minItems, maxItems, enum, const, anyOf, oneOf, $ref"
                ));
            }
        }
        if let Some(r) = obj.get("$ref") {
            return self.reference(r, at);
        }
        if let Some(c) = obj.get("const") {
            return Ok(self.literal(c));
        }
        if let Some(e) = obj.get("enum") {
            let list = e
                .as_array()
                .filter(|l| !l.is_empty())
                .ok_or_else(|| format!("enum at {at} must be a non-empty array"))?;
            let ids = list.iter().map(|v| self.literal(v)).collect();
            return Ok(self.push(Node::Union(ids)));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(list) = obj.get(key) {
                let list = list
                    .as_array()
                    .filter(|l| !l.is_empty())
                    .ok_or_else(|| format!("{key} at {at} must be a non-empty array"))?;
                let mut ids = Vec::new();
                for (i, sub) in list.iter().enumerate() {
                    ids.push(self.node(sub, &format!("{at}/{key}/{i}"))?);
                }
                return Ok(self.push(Node::Union(ids)));
            }
        }
        let types: Vec<&str> = match obj.get("type") {
            None => {
                if obj.contains_key("properties") {
                    vec!["object"]
                } else if obj.contains_key("items") {
                    vec!["array"]
                } else {
                    return Ok(ANY);
                }
            }
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(l)) => l
                .iter()
                .map(|t| {
                    t.as_str().ok_or_else(|| {
                        format!("type at {at} must be a string or a list of strings")
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(format!(
                    "type at {at} must be a string or a list of strings"
                ))
            }
        };
        let mut ids = Vec::new();
        for t in types {
            let id = match t {
                "object" => self.object(obj, at)?,
                "array" => self.array(obj, at)?,
                "string" => self.push(Node::String),
                "number" => self.push(Node::Number(false)),
                "integer" => self.push(Node::Number(true)),
                "boolean" => self.push(Node::Union(vec![TRUE, FALSE])),
                "null" => NULL,
                other => return Err(format!("unknown type {other:?} at {at}")),
            };
            ids.push(id);
        }
        Ok(if ids.len() == 1 {
            ids[0]
        } else {
            self.push(Node::Union(ids))
        })
    }

    fn reference(&mut self, r: &Value, at: &str) -> Result<u32, String> {
        let r = r
            .as_str()
            .ok_or_else(|| format!("$ref at {at} must be a string"))?;
        if let Some(&id) = self.refs.get(r) {
            return Ok(id);
        }
        let path = r
            .strip_prefix("#/$defs/")
            .map(|n| ("$defs", n))
            .or_else(|| r.strip_prefix("#/definitions/").map(|n| ("definitions", n)));
        let target = match path {
            Some((section, name)) => self.root.get(section).and_then(|d| d.get(name)),
            None if r == "#" => Some(self.root),
            None => None,
        }
        .ok_or_else(|| {
            format!("$ref {r:?} at {at} does not point into #/$defs or #/definitions")
        })?;
        // Placeholder first so a recursive reference finds it.
        let placeholder = self.push(Node::Union(Vec::new()));
        self.refs.insert(r.to_string(), placeholder);
        let id = self.node(target, r)?;
        self.nodes[placeholder as usize] = Node::Union(vec![id]);
        Ok(placeholder)
    }

    fn object(&mut self, obj: &Map<String, Value>, at: &str) -> Result<u32, String> {
        let mut props = Vec::new();
        if let Some(p) = obj.get("properties") {
            let p = p
                .as_object()
                .ok_or_else(|| format!("properties at {at} must be an object"))?;
            for (name, sub) in p {
                let id = self.node(sub, &format!("{at}/properties/{name}"))?;
                props.push((name.clone(), id));
            }
        }
        let mut required = Vec::new();
        if let Some(r) = obj.get("required") {
            let r = r
                .as_array()
                .ok_or_else(|| format!("required at {at} must be an array"))?;
            for name in r {
                let name = name
                    .as_str()
                    .ok_or_else(|| format!("required at {at} must list strings"))?;
                let i = props.iter().position(|(n, _)| n == name).ok_or_else(|| {
                    format!("required property {name:?} at {at} is not in properties")
                })?;
                required.push(i);
            }
        }
        let additional = match obj.get("additionalProperties") {
            None if props.is_empty() => Some(ANY),
            None | Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(ANY),
            Some(s) => Some(self.node(s, &format!("{at}/additionalProperties"))?),
        };
        Ok(self.push(Node::Object {
            props,
            required,
            additional,
        }))
    }

    fn array(&mut self, obj: &Map<String, Value>, at: &str) -> Result<u32, String> {
        let items = match obj.get("items") {
            None => ANY,
            Some(s) => self.node(s, &format!("{at}/items"))?,
        };
        let count = |k: &str| -> Result<Option<usize>, String> {
            match obj.get(k) {
                None => Ok(None),
                Some(v) => v
                    .as_u64()
                    .map(|n| Some(n as usize))
                    .ok_or_else(|| format!("{k} at {at} must be a non-negative integer")),
            }
        };
        let min = count("minItems")?.unwrap_or(0);
        let max = count("maxItems")?;
        if max.is_some_and(|m| m < min) {
            return Err(format!("maxItems is below minItems at {at}"));
        }
        Ok(self.push(Node::Array { items, min, max }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn unsupported_keywords_are_named() {
        let e = JsonSchema::compile(&json!({"type": "string", "pattern": "^a"})).unwrap_err();
        assert!(e.contains("\"pattern\""), "{e}");
        let e = JsonSchema::compile(&json!({"type": "object",
            "properties": {"n": {"type": "integer", "minimum": 3}}}))
        .unwrap_err();
        assert!(
            e.contains("\"minimum\"") && e.contains("/properties/n"),
            "{e}"
        );
        let e = JsonSchema::compile(&json!({"type": "object", "properties": {},
            "required": ["x"]}))
        .unwrap_err();
        assert!(e.contains("\"x\""), "{e}");
    }

    #[test]
    fn tool_calls_take_a_declared_name_and_its_arguments_only() {
        use crate::sampler::JsonAcceptor;
        let point = json!({"type": "object", "$defs": {"n": {"type": "integer"}},
            "properties": {"x": {"$ref": "#/$defs/n"}}, "required": ["x"]});
        let s = Arc::new(
            JsonSchema::tool_call(&[("move".into(), Some(point)), ("stop".into(), None)]).unwrap(),
        );
        let accepts = |text: &str| {
            let mut a = JsonAcceptor::new(s.clone());
            a.feed(text.as_bytes()) && a.is_complete()
        };
        assert!(accepts(r#"{"name": "move", "arguments": {"x": 3}}"#));
        assert!(accepts(r#"{"arguments": {"x": -1}, "name": "move"}"#));
        assert!(accepts(r#"{"name": "stop", "arguments": {"why": [1]}}"#));
        assert!(!accepts(r#"{"name": "move", "arguments": {"x": "3"}}"#));
        assert!(!accepts(r#"{"name": "move", "arguments": {}}"#));
        assert!(!accepts(r#"{"name": "jump", "arguments": {}}"#));
        assert!(!accepts(r#"{"name": "stop"}"#));
        assert!(!accepts(r#"{"name": "stop", "arguments": {}, "id": 1}"#));
        let e = JsonSchema::tool_call(&[(
            "f".into(),
            Some(json!({"type": "object", "properties": {"s": {"type": "string", "format": "date"}}})),
        )])
        .unwrap_err();
        assert!(e.contains("\"f\"") && e.contains("\"format\""), "{e}");
        assert!(JsonSchema::tool_call(&[]).is_err());
    }

    #[test]
    fn objects_with_properties_forbid_other_keys_by_default() {
        let s = JsonSchema::compile(&json!({"properties": {"a": {"type": "string"}}})).unwrap();
        match &s.nodes[s.root as usize] {
            Node::Object { additional, .. } => assert_eq!(*additional, None),
            n => panic!("{n:?}"),
        }
    }
}
