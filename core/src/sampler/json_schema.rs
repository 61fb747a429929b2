//! JSON Schema subset for constrained decoding, compiled into a small graph of nodes that
//! [`JsonAcceptor`](super::JsonAcceptor) walks byte by byte.
//!
//! Enforced: `type` (one name or a list), `properties`, `required`, `additionalProperties`
//! (bool or schema), `items`, `prefixItems`, `minItems`, `maxItems`, `enum`, `const`, `anyOf` /
//! `oneOf` (both as "any of": exclusivity is not enforced), `allOf` with one schema, `$ref` to
//! `#`, `#/$defs/...` or `#/definitions/...` (recursion included), on strings `pattern`
//! ([`regex`](super::regex)), `format` ([`formats`](super::formats)), `minLength`,
//! `maxLength`, on numbers `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`,
//! `multipleOf` ([`numbers`](super::numbers)); annotations that do not constrain (`title`,
//! `description`, `default`, `examples`, `$schema`, `$id`, `$comment`, `strict`, ...) are
//! ignored. Any other keyword (`uniqueItems`, `not`, `if`, `patternProperties`, ...) is an
//! error naming it, so a caller can answer 400 instead of silently ignoring a constraint.
//!
//! An object schema with `properties` and no `additionalProperties` allows no other keys (as
//! llama.cpp and OpenAI's strict mode do); without `properties` any key is allowed.
//!
//! No dead ends: every leaf is checked to admit some value when compiled, and [`prune`] then
//! drops what can never finish (a required property whose schema recurses into itself without
//! end, an `anyOf` member that cannot be completed), so the acceptor never walks into a state
//! with no completion. A schema left with no finite value is an error.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::formats;
use super::numbers::NumberRule;
use super::regex;
use super::string_rule::StringRule;

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
        /// Schemas of the first items, in order (`prefixItems`).
        prefix: Vec<u32>,
        /// Schema of the items after those.
        items: u32,
        min: usize,
        max: Option<usize>,
    },
    /// A string; constrained by `JsonSchema::strings[i]` when `Some(i)`.
    String(Option<u32>),
    /// `integer` when true (no fraction, no exponent); bounded by `JsonSchema::numbers[i]`
    /// when `Some(i)`.
    Number(bool, Option<u32>),
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
    pub(crate) strings: Vec<StringRule>,
    pub(crate) numbers: Vec<NumberRule>,
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

/// Keywords that constrain, all enforced.
const ENFORCED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "pattern",
    "format",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];

const STRING_KEYS: &[&str] = &["pattern", "format", "minLength", "maxLength"];
const NUMBER_KEYS: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];

/// The pieces a compilation builds (several tools' schemas share one set).
struct Parts {
    nodes: Vec<Node>,
    strings: Vec<StringRule>,
    numbers: Vec<NumberRule>,
    /// Where each node came from, for errors.
    paths: Vec<String>,
}

impl Parts {
    fn new() -> Parts {
        let nodes = JsonSchema::base();
        let paths = vec![String::new(); nodes.len()];
        Parts {
            nodes,
            strings: Vec::new(),
            numbers: Vec::new(),
            paths,
        }
    }

    /// Prunes what cannot finish, then the schema rooted at `root`.
    fn finish(mut self, root: u32) -> Result<JsonSchema, String> {
        prune(&mut self.nodes, &self.paths, root)?;
        Ok(JsonSchema {
            nodes: self.nodes,
            root,
            strings: self.strings,
            numbers: self.numbers,
        })
    }
}

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
                prefix: Vec::new(),
                items: ANY,
                min: 0,
                max: None,
            },
            Node::Literal(b"true".to_vec()),
            Node::Literal(b"false".to_vec()),
            Node::Literal(b"null".to_vec()),
        ]
    }

    fn plain(root: u32) -> JsonSchema {
        JsonSchema {
            nodes: Self::base(),
            root,
            strings: Vec::new(),
            numbers: Vec::new(),
        }
    }

    /// Any JSON object (OpenAI `json_object`, Ollama `format: "json"`).
    pub fn any_object() -> JsonSchema {
        Self::plain(ANY_OBJECT)
    }

    /// Any JSON value.
    pub fn any_value() -> JsonSchema {
        Self::plain(ANY)
    }

    /// Compiles a schema; the error names the unsupported keyword or the bad value.
    pub fn compile(schema: &Value) -> Result<JsonSchema, String> {
        let mut c = Compiler {
            parts: Parts::new(),
            root: schema,
            refs: HashMap::new(),
        };
        let root = c.node(schema, "#")?;
        c.parts.finish(root)
    }

    /// One tool call, `{"name": NAME, "arguments": ARGS}`, for any of `tools` (name, and its
    /// `parameters` schema; `None` means any object): what a forced tool call (OpenAI
    /// `tool_choice`) constrains the reply to. Each parameters schema is compiled on its own,
    /// so its `$ref`s resolve against its own `$defs`. The error names the tool.
    pub fn tool_call(tools: &[(String, Option<Value>)]) -> Result<JsonSchema, String> {
        if tools.is_empty() {
            return Err("no tools to call".into());
        }
        let mut parts = Parts::new();
        let mut calls = Vec::new();
        for (name, params) in tools {
            let args = match params {
                None => ANY_OBJECT,
                Some(p) => {
                    let mut c = Compiler {
                        parts,
                        root: p,
                        refs: HashMap::new(),
                    };
                    let id = c
                        .node(p, "#")
                        .map_err(|e| format!("tool {name:?} parameters: {e}"))?;
                    parts = c.parts;
                    // A tool whose arguments cannot be completed is an error, not a call
                    // the model could start and never finish.
                    let mut check = parts.nodes.clone();
                    prune(&mut check, &parts.paths, id)
                        .map_err(|e| format!("tool {name:?} parameters: {e}"))?;
                    id
                }
            };
            parts.nodes.push(Node::Literal(
                Value::from(name.as_str()).to_string().into_bytes(),
            ));
            parts.paths.push(String::new());
            let name_id = (parts.nodes.len() - 1) as u32;
            parts.nodes.push(Node::Object {
                props: vec![("name".into(), name_id), ("arguments".into(), args)],
                required: vec![0, 1],
                additional: None,
            });
            parts.paths.push(format!("tool {name:?}"));
            calls.push((parts.nodes.len() - 1) as u32);
        }
        let root = if calls.len() == 1 {
            calls[0]
        } else {
            parts.nodes.push(Node::Union(calls));
            parts.paths.push("tools".into());
            (parts.nodes.len() - 1) as u32
        };
        parts.finish(root)
    }
}

/// Which nodes can produce a finite value (a least fixed point: leaves can, an object when
/// all its required properties can, an array when its first `min` items can, a union when a
/// member can); then drops what cannot from the graph: union members, optional properties,
/// additional properties, and array items past the last that can (lowering `maxItems`). The
/// error names the schema at `root` and, for an object, the required property at fault.
fn prune(nodes: &mut [Node], paths: &[String], root: u32) -> Result<(), String> {
    let n = nodes.len();
    let mut ok = vec![false; n];
    loop {
        let mut changed = false;
        for i in 0..n {
            if ok[i] {
                continue;
            }
            let good = match &nodes[i] {
                Node::Any | Node::String(_) | Node::Number(..) | Node::Literal(_) => true,
                Node::Object {
                    props, required, ..
                } => required.iter().all(|&r| ok[props[r].1 as usize]),
                Node::Array {
                    prefix, items, min, ..
                } => (0..*min).all(|k| ok[*prefix.get(k).unwrap_or(items) as usize]),
                Node::Union(m) => m.iter().any(|&x| ok[x as usize]),
            };
            if good {
                ok[i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    if !ok[root as usize] {
        let at = &paths[root as usize];
        let detail = match &nodes[root as usize] {
            Node::Object {
                props, required, ..
            } => required
                .iter()
                .map(|&r| &props[r])
                .find(|(_, id)| !ok[*id as usize])
                .map(|(name, _)| format!(": required property {name:?} can never be completed"))
                .unwrap_or_default(),
            _ => String::new(),
        };
        return Err(format!(
            "schema at {at} admits no finite value (it requires itself without end){detail}"
        ));
    }
    for node in nodes.iter_mut() {
        match node {
            Node::Union(m) => m.retain(|&x| ok[x as usize]),
            Node::Object {
                props,
                required,
                additional,
            } => {
                let keep: Vec<bool> = props.iter().map(|(_, id)| ok[*id as usize]).collect();
                let mut new_index = vec![usize::MAX; props.len()];
                let mut next = 0;
                for (i, k) in keep.iter().enumerate() {
                    if *k {
                        new_index[i] = next;
                        next += 1;
                    }
                }
                // Unproductive objects keep their required list as is: nothing reaches them.
                if required.iter().all(|&r| keep[r]) {
                    for r in required.iter_mut() {
                        *r = new_index[*r];
                    }
                    let mut i = 0;
                    props.retain(|_| {
                        i += 1;
                        keep[i - 1]
                    });
                }
                if additional.is_some_and(|a| !ok[a as usize]) {
                    *additional = None;
                }
            }
            Node::Array {
                prefix,
                items,
                min,
                max,
            } => {
                // The first item that can never finish caps the array before it.
                let stop = prefix
                    .iter()
                    .position(|&p| !ok[p as usize])
                    .or_else(|| (!ok[*items as usize]).then_some(prefix.len()));
                if let Some(s) = stop {
                    if s >= *min {
                        *max = Some(max.map_or(s, |m| m.min(s)));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

struct Compiler<'a> {
    parts: Parts,
    root: &'a Value,
    refs: HashMap<String, u32>,
}

/// The first keyword of `obj` that constrains, other than `except`.
fn constraining_sibling<'o>(obj: &'o Map<String, Value>, except: &str) -> Option<&'o str> {
    obj.keys()
        .map(String::as_str)
        .find(|k| *k != except && !IGNORED.contains(k))
}

impl Compiler<'_> {
    fn push(&mut self, n: Node, at: &str) -> u32 {
        self.parts.nodes.push(n);
        self.parts.paths.push(at.to_string());
        (self.parts.nodes.len() - 1) as u32
    }

    fn literal(&mut self, v: &Value, at: &str) -> u32 {
        self.push(Node::Literal(v.to_string().into_bytes()), at)
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
            if !ENFORCED.contains(&k.as_str()) && !IGNORED.contains(&k.as_str()) {
                return Err(format!(
                    "JSON schema keyword {k:?} (at {at}) is not supported; supported: {}",
                    ENFORCED.join(", ")
                ));
            }
        }
        // `$ref` / `allOf` stand for their target: a constraint beside them would need an
        // intersection of schemas, which is not supported.
        for key in ["$ref", "allOf"] {
            if obj.contains_key(key) {
                if let Some(other) = constraining_sibling(obj, key) {
                    return Err(format!(
                        "JSON schema keyword {other:?} beside {key:?} (at {at}) is not supported"
                    ));
                }
            }
        }
        if let Some(r) = obj.get("$ref") {
            return self.reference(r, at);
        }
        if let Some(list) = obj.get("allOf") {
            return match list.as_array().map(Vec::as_slice) {
                Some([one]) => self.node(one, &format!("{at}/allOf/0")),
                Some([_, _, ..]) => Err(format!(
                    "allOf with more than one schema (at {at}) is not supported"
                )),
                _ => Err(format!("allOf at {at} must be a non-empty array")),
            };
        }
        if let Some(c) = obj.get("const") {
            return Ok(self.literal(c, at));
        }
        if let Some(e) = obj.get("enum") {
            let list = e
                .as_array()
                .filter(|l| !l.is_empty())
                .ok_or_else(|| format!("enum at {at} must be a non-empty array"))?;
            let ids = list.iter().map(|v| self.literal(v, at)).collect();
            return Ok(self.push(Node::Union(ids), at));
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
                return Ok(self.push(Node::Union(ids), at));
            }
        }
        let has = |keys: &[&str]| keys.iter().any(|k| obj.contains_key(*k));
        let types: Vec<&str> = match obj.get("type") {
            // Without a type, the keywords present say which type is meant (decoding may
            // produce fewer kinds of value than the schema allows, never more).
            None => {
                if obj.contains_key("properties") {
                    vec!["object"]
                } else if has(&["items", "prefixItems", "minItems", "maxItems"]) {
                    vec!["array"]
                } else if has(STRING_KEYS) {
                    vec!["string"]
                } else if has(NUMBER_KEYS) {
                    vec!["number"]
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
                "string" => self.string(obj, at)?,
                "number" | "integer" => {
                    let integer = t == "integer";
                    let rule = match NumberRule::new(integer, obj, at)? {
                        None => None,
                        Some(r) => {
                            self.parts.numbers.push(r);
                            Some((self.parts.numbers.len() - 1) as u32)
                        }
                    };
                    self.push(Node::Number(integer, rule), at)
                }
                "boolean" => self.push(Node::Union(vec![TRUE, FALSE]), at),
                "null" => NULL,
                other => return Err(format!("unknown type {other:?} at {at}")),
            };
            ids.push(id);
        }
        Ok(if ids.len() == 1 {
            ids[0]
        } else {
            self.push(Node::Union(ids), at)
        })
    }

    fn string(&mut self, obj: &Map<String, Value>, at: &str) -> Result<u32, String> {
        if !STRING_KEYS.iter().any(|k| obj.contains_key(*k)) {
            return Ok(self.push(Node::String(None), at));
        }
        let mut autos = Vec::new();
        let mut max = None;
        if let Some(p) = obj.get("pattern") {
            let p = p
                .as_str()
                .ok_or_else(|| format!("pattern at {at} must be a string"))?;
            autos.push(regex::compile(p).map_err(|e| format!("pattern {p:?} at {at}: {e}"))?);
        }
        if let Some(f) = obj.get("format") {
            let f = f
                .as_str()
                .ok_or_else(|| format!("format at {at} must be a string"))?;
            let p = formats::pattern(f).ok_or_else(|| {
                format!(
                    "JSON schema keyword \"format\" value {f:?} (at {at}) is not supported; supported formats: {}",
                    formats::FORMATS.join(", ")
                )
            })?;
            autos.push(regex::compile(&p).map_err(|e| format!("format {f:?}: {e}"))?);
            if f == "hostname" {
                max = Some(formats::HOSTNAME_MAX);
            }
        }
        let count = |k: &str| -> Result<Option<u32>, String> {
            match obj.get(k) {
                None => Ok(None),
                Some(v) => v
                    .as_u64()
                    .map(|n| Some(n.min(u32::MAX as u64 - 1) as u32))
                    .ok_or_else(|| format!("{k} at {at} must be a non-negative integer")),
            }
        };
        let min = count("minLength")?.unwrap_or(0);
        if let Some(m) = count("maxLength")? {
            max = Some(max.map_or(m, |x: u32| x.min(m)));
        }
        let rule = StringRule::new(autos, min, max).map_err(|e| format!("string at {at}: {e}"))?;
        self.parts.strings.push(rule);
        let id = (self.parts.strings.len() - 1) as u32;
        Ok(self.push(Node::String(Some(id)), at))
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
        // Placeholder first so a recursive reference finds it: recursion is a cycle in the
        // graph, expanded lazily by the acceptor, never unrolled here.
        let placeholder = self.push(Node::Union(Vec::new()), r);
        self.refs.insert(r.to_string(), placeholder);
        let id = self.node(target, r)?;
        self.parts.nodes[placeholder as usize] = Node::Union(vec![id]);
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
                if !required.contains(&i) {
                    required.push(i);
                }
            }
        }
        let additional = match obj.get("additionalProperties") {
            None if props.is_empty() => Some(ANY),
            None | Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(ANY),
            Some(s) => Some(self.node(s, &format!("{at}/additionalProperties"))?),
        };
        Ok(self.push(
            Node::Object {
                props,
                required,
                additional,
            },
            at,
        ))
    }

    fn array(&mut self, obj: &Map<String, Value>, at: &str) -> Result<u32, String> {
        let mut prefix = Vec::new();
        if let Some(p) = obj.get("prefixItems") {
            let p = p
                .as_array()
                .ok_or_else(|| format!("prefixItems at {at} must be an array"))?;
            for (i, sub) in p.iter().enumerate() {
                prefix.push(self.node(sub, &format!("{at}/prefixItems/{i}"))?);
            }
        }
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
        let mut max = count("maxItems")?;
        let items = match obj.get("items") {
            None => ANY,
            // `items: false` after `prefixItems`: nothing beyond the prefix.
            Some(Value::Bool(false)) => {
                max = Some(max.map_or(prefix.len(), |m| m.min(prefix.len())));
                ANY
            }
            Some(s) => self.node(s, &format!("{at}/items"))?,
        };
        if max.is_some_and(|m| m < min) {
            return Err(format!("maxItems is below minItems at {at}"));
        }
        Ok(self.push(
            Node::Array {
                prefix,
                items,
                min,
                max,
            },
            at,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn unsupported_keywords_are_named() {
        let e = JsonSchema::compile(&json!({"type": "array", "uniqueItems": true})).unwrap_err();
        assert!(e.contains("\"uniqueItems\""), "{e}");
        let e = JsonSchema::compile(&json!({"type": "object",
            "properties": {"n": {"type": "integer", "not": {"const": 3}}}}))
        .unwrap_err();
        assert!(e.contains("\"not\"") && e.contains("/properties/n"), "{e}");
        let e = JsonSchema::compile(&json!({"type": "object", "properties": {},
            "required": ["x"]}))
        .unwrap_err();
        assert!(e.contains("\"x\""), "{e}");
        let e = JsonSchema::compile(&json!({"type": "string", "format": "iri"})).unwrap_err();
        assert!(e.contains("format") && e.contains("\"iri\""), "{e}");
        let e = JsonSchema::compile(&json!({"type": "string", "pattern": "(a)\\1"})).unwrap_err();
        assert!(e.contains("pattern") && e.contains("backreference"), "{e}");
        let e = JsonSchema::compile(&json!({"$defs": {"a": {"type": "integer"}},
            "$ref": "#/$defs/a", "minimum": 3}))
        .unwrap_err();
        assert!(e.contains("\"minimum\"") && e.contains("$ref"), "{e}");
        let e = JsonSchema::compile(&json!({"allOf": [{"type": "integer"}, {"minimum": 1}]}))
            .unwrap_err();
        assert!(e.contains("allOf"), "{e}");
    }

    #[test]
    fn schemas_without_a_finite_value_are_errors() {
        // A node that requires a child node, forever.
        let e = JsonSchema::compile(&json!({"$defs": {"n": {"type": "object",
            "properties": {"next": {"$ref": "#/$defs/n"}}, "required": ["next"]}},
            "$ref": "#/$defs/n"}))
        .unwrap_err();
        assert!(e.contains("no finite value"), "{e}");
        let e = JsonSchema::compile(
            &json!({"type": "object", "properties": {"kids": {"$ref": "#"}},
            "required": ["kids"]}),
        )
        .unwrap_err();
        assert!(e.contains("\"kids\""), "{e}");
        for bad in [
            json!({"type": "string", "minLength": 3, "maxLength": 2}),
            json!({"type": "string", "pattern": "^a{3}$", "maxLength": 2}),
            json!({"type": "string", "format": "uuid", "pattern": "^x"}),
            json!({"type": "integer", "minimum": 3, "maximum": 1}),
            json!({"type": "array", "minItems": 3, "maxItems": 1}),
        ] {
            assert!(JsonSchema::compile(&bad).is_err(), "{bad}");
        }
        // An optional property that can never finish is dropped, not an error.
        let s = JsonSchema::compile(&json!({"$defs": {"n": {"type": "object",
            "properties": {"next": {"$ref": "#/$defs/n"}}, "required": ["next"]}},
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"$ref": "#/$defs/n"}}}))
        .unwrap();
        match &s.nodes[s.root as usize] {
            Node::Object { props, .. } => assert_eq!(props.len(), 1),
            n => panic!("{n:?}"),
        }
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
            Some(
                json!({"type": "object", "properties": {"s": {"type": "string", "format": "iri"}}}),
            ),
        )])
        .unwrap_err();
        assert!(e.contains("\"f\"") && e.contains("\"format\""), "{e}");
        assert!(JsonSchema::tool_call(&[]).is_err());
        // Constrained parameters, as forced tool calls get them.
        let s = Arc::new(
            JsonSchema::tool_call(&[(
                "book".into(),
                Some(json!({"type": "object", "properties": {
                    "seats": {"type": "integer", "minimum": 1, "maximum": 9},
                    "day": {"type": "string", "format": "date"}},
                    "required": ["seats", "day"]})),
            )])
            .unwrap(),
        );
        let accepts = |text: &str| {
            let mut a = JsonAcceptor::new(s.clone());
            a.feed(text.as_bytes()) && a.is_complete()
        };
        assert!(accepts(
            r#"{"name": "book", "arguments": {"seats": 2, "day": "2024-05-01"}}"#
        ));
        assert!(!accepts(
            r#"{"name": "book", "arguments": {"seats": 12, "day": "2024-05-01"}}"#
        ));
        assert!(!accepts(
            r#"{"name": "book", "arguments": {"seats": 2, "day": "May 1"}}"#
        ));
        let e = JsonSchema::tool_call(&[(
            "loop".into(),
            Some(
                json!({"type": "object", "properties": {"again": {"$ref": "#"}},
                "required": ["again"]}),
            ),
        )])
        .unwrap_err();
        assert!(
            e.contains("\"loop\"") && e.contains("no finite value"),
            "{e}"
        );
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
