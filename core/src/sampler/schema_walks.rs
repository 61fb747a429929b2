//! Property checks of constrained decoding: random walks through the acceptor, each byte drawn
//! among those it allows, must never get stuck and must end in a value that a separate, small
//! validator (written from the JSON Schema rules, on parsed JSON) accepts.

use std::sync::Arc;

use serde_json::{json, Value};

use super::regex;
use super::rng::Rng;
use super::{JsonAcceptor, JsonSchema};

/// Validates `v` against the keywords the tests use; `root` resolves `$ref`.
fn valid(s: &Value, v: &Value, root: &Value) -> Result<(), String> {
    let o = match s {
        Value::Bool(b) => {
            return if *b {
                Ok(())
            } else {
                Err("false schema".into())
            }
        }
        Value::Object(o) => o,
        _ => return Err("bad schema".into()),
    };
    if let Some(r) = o.get("$ref").and_then(Value::as_str) {
        let target = match r.strip_prefix("#/$defs/") {
            Some(name) => &root["$defs"][name],
            None => root,
        };
        return valid(target, v, root);
    }
    if let Some(all) = o.get("allOf").and_then(Value::as_array) {
        for x in all {
            valid(x, v, root)?;
        }
    }
    if let Some(any) = o.get("anyOf").and_then(Value::as_array) {
        if !any.iter().any(|x| valid(x, v, root).is_ok()) {
            return Err(format!("{v} matches no anyOf member"));
        }
    }
    if let Some(e) = o.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return Err(format!("{v} not in enum"));
        }
    }
    if let Some(t) = o.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        };
        if !ok {
            return Err(format!("{v} is not {t}"));
        }
    }
    if let Some(x) = v.as_f64().filter(|_| v.is_number()) {
        let f = |k: &str| o.get(k).and_then(Value::as_f64);
        let checks = [
            f("minimum").is_none_or(|m| x >= m),
            f("maximum").is_none_or(|m| x <= m),
            f("exclusiveMinimum").is_none_or(|m| x > m),
            f("exclusiveMaximum").is_none_or(|m| x < m),
            // Decimal multiples: a float quotient within rounding of an integer.
            f("multipleOf").is_none_or(|m| ((x / m) - (x / m).round()).abs() < 1e-9),
        ];
        if checks.contains(&false) {
            return Err(format!("{v} breaks a numeric bound of {s}"));
        }
    }
    if let Some(text) = v.as_str() {
        let n = text.chars().count() as u64;
        let u = |k: &str| o.get(k).and_then(Value::as_u64);
        if u("minLength").is_some_and(|m| n < m) || u("maxLength").is_some_and(|m| n > m) {
            return Err(format!("{v}: length {n} out of bounds"));
        }
        if let Some(p) = o.get("pattern").and_then(Value::as_str) {
            if !regex::compile(p).unwrap().matches(text) {
                return Err(format!("{v} does not match {p}"));
            }
        }
        if let Some(f) = o.get("format").and_then(Value::as_str) {
            format_ok(f, text).map_err(|e| format!("{v} is not a {f}: {e}"))?;
        }
    }
    if let Some(items) = v.as_array() {
        let u = |k: &str| o.get(k).and_then(Value::as_u64).map(|n| n as usize);
        if u("minItems").is_some_and(|m| items.len() < m)
            || u("maxItems").is_some_and(|m| items.len() > m)
        {
            return Err(format!("{v}: item count out of bounds"));
        }
        let prefix = o.get("prefixItems").and_then(Value::as_array);
        for (i, x) in items.iter().enumerate() {
            match prefix.and_then(|p| p.get(i)) {
                Some(ps) => valid(ps, x, root)?,
                None => {
                    if let Some(is) = o.get("items") {
                        valid(is, x, root)?;
                    }
                }
            }
        }
    }
    if let Some(map) = v.as_object() {
        let props = o.get("properties").and_then(Value::as_object);
        for r in o
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !map.contains_key(r.as_str().unwrap()) {
                return Err(format!("{v} lacks {r}"));
            }
        }
        for (k, x) in map {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => valid(ps, x, root)?,
                None if props.is_some() => match o.get("additionalProperties") {
                    Some(a) if a != &Value::Bool(false) => valid(a, x, root)?,
                    _ => return Err(format!("{v}: extra key {k}")),
                },
                None => {}
            }
        }
    }
    Ok(())
}

/// Formats checked by hand (not by their patterns), loosely but independently.
fn format_ok(f: &str, t: &str) -> Result<(), String> {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let num = |s: &str| s.parse::<u32>().unwrap_or(999);
    let date = |d: &str| -> bool {
        let p: Vec<&str> = d.split('-').collect();
        p.len() == 3
            && digits(p[0], 4)
            && digits(p[1], 2)
            && digits(p[2], 2)
            && (1..=12).contains(&num(p[1]))
            && (1..=31).contains(&num(p[2]))
    };
    let time = |t: &str| -> bool {
        let (clock, _offset) = match t.find(['Z', '+', '-']) {
            Some(i) => t.split_at(i),
            None => return false,
        };
        let clock = clock.split('.').next().unwrap_or("");
        let p: Vec<&str> = clock.split(':').collect();
        p.len() == 3
            && p.iter().all(|x| digits(x, 2))
            && num(p[0]) < 24
            && num(p[1]) < 60
            && num(p[2]) < 60
    };
    let ok = match f {
        "date" => date(t),
        "date-time" => t.split_once('T').is_some_and(|(d, c)| date(d) && time(c)),
        "ipv4" => {
            let p: Vec<&str> = t.split('.').collect();
            p.len() == 4
                && p.iter().all(|x| {
                    !x.is_empty()
                        && x.len() <= 3
                        && x.bytes().all(|b| b.is_ascii_digit())
                        && (x.len() == 1 || !x.starts_with('0'))
                        && num(x) <= 255
                })
        }
        "ipv6" => t.parse::<std::net::Ipv6Addr>().is_ok(),
        "uuid" => {
            let p: Vec<&str> = t.split('-').collect();
            p.iter().map(|x| x.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
                && p.iter().all(|x| x.bytes().all(|b| b.is_ascii_hexdigit()))
        }
        "email" => t.split_once('@').is_some_and(|(l, d)| {
            !l.is_empty() && d.contains('.') && !d.starts_with('.') && !d.ends_with('.')
        }),
        _ => return Err(format!("no checker for {f}")),
    };
    if ok {
        Ok(())
    } else {
        Err("malformed".into())
    }
}

/// One random walk: bytes drawn among the allowed ones (with a growing preference for bytes
/// that close things, so walks end); panics on a dead end.
fn walk(schema: &Arc<JsonSchema>, rng: &mut Rng) -> String {
    let mut a = JsonAcceptor::new(schema.clone());
    let mut out = Vec::new();
    for step in 0..20_000 {
        if a.is_complete() || (a.can_end() && rng.next_f64() < 0.3) {
            return String::from_utf8(out).expect("valid UTF-8");
        }
        let allowed: Vec<u8> = (0..=255u8).filter(|&b| a.accepts_byte(b)).collect();
        if allowed.is_empty() && a.can_end() {
            // A top-level number that cannot grow.
            return String::from_utf8(out).expect("valid UTF-8");
        }
        assert!(
            !allowed.is_empty(),
            "dead end after {:?}",
            String::from_utf8_lossy(&out)
        );
        let closers: Vec<u8> = allowed
            .iter()
            .copied()
            .filter(|b| b"\"]}".contains(b))
            .collect();
        let ascii: Vec<u8> = allowed.iter().copied().filter(|b| *b < 0x80).collect();
        // Never always closing: a `}` inside a string is content, and some strings need a
        // particular character (an email's `@`) before they may close.
        let closing = rng.next_f64() < (0.15 + step as f64 / 400.0).min(0.6);
        let pool = if closing && !closers.is_empty() {
            &closers
        } else if !ascii.is_empty() && rng.next_f64() < 0.9 {
            &ascii
        } else {
            &allowed
        };
        let b = pool[(rng.next_u64() % pool.len() as u64) as usize];
        assert!(a.feed(&[b]));
        out.push(b);
    }
    panic!("walk did not end: {:?}", String::from_utf8_lossy(&out));
}

fn check_walks(schema: Value, walks: usize) {
    let compiled = Arc::new(JsonSchema::compile(&schema).unwrap());
    let mut rng = Rng::new(7);
    for _ in 0..walks {
        let text = walk(&compiled, &mut rng);
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        if let Err(e) = valid(&schema, &v, &schema) {
            panic!("{text}: {e}");
        }
    }
}

#[test]
fn random_walks_end_in_valid_strings() {
    check_walks(
        json!({"type": "string", "pattern": r"^[A-Z]{3}-\d{4}$"}),
        40,
    );
    check_walks(
        json!({"type": "string", "pattern": "ab", "maxLength": 5}),
        40,
    );
    check_walks(
        json!({"type": "string", "minLength": 2, "maxLength": 4}),
        40,
    );
    for f in ["date", "date-time", "ipv4", "ipv6", "uuid", "email"] {
        check_walks(json!({"type": "string", "format": f}), 25);
    }
    check_walks(
        json!({"type": "string", "format": "email", "maxLength": 12}),
        25,
    );
}

#[test]
fn random_walks_end_in_valid_numbers() {
    check_walks(json!({"type": "integer", "minimum": 0, "maximum": 120}), 60);
    check_walks(
        json!({"type": "integer", "minimum": -37, "maximum": -5}),
        60,
    );
    check_walks(
        json!({"type": "number", "exclusiveMinimum": 0.0, "exclusiveMaximum": 1.0}),
        60,
    );
    check_walks(
        json!({"type": "integer", "multipleOf": 5, "minimum": 3, "maximum": 48}),
        60,
    );
    check_walks(
        json!({"type": "number", "multipleOf": 0.25, "maximum": -1.5}),
        60,
    );
    check_walks(
        json!({"type": "array", "items": {"type": "integer", "minimum": 10, "maximum": 12}}),
        30,
    );
}

#[test]
fn random_walks_end_in_valid_structures() {
    // What pydantic emits for a model with constrained fields, Optional, a nested model and a
    // recursive one.
    let schema = json!({
        "$defs": {
            "Addr": {"type": "object", "properties": {
                "ip": {"type": "string", "format": "ipv4"},
                "port": {"type": "integer", "minimum": 1, "maximum": 65535}},
                "required": ["ip", "port"]},
            "Node": {"type": "object", "properties": {
                "name": {"type": "string", "maxLength": 3},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "maxItems": 2}},
                "required": ["name"]}
        },
        "type": "object",
        "properties": {
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "nick": {"anyOf": [{"type": "string", "minLength": 2, "maxLength": 5}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "minItems": 1, "maxItems": 3},
            "addr": {"allOf": [{"$ref": "#/$defs/Addr"}], "description": "where"},
            "tree": {"$ref": "#/$defs/Node"},
            "pair": {"type": "array", "prefixItems": [{"type": "integer", "minimum": 5}, {"type": "string", "format": "date"}], "items": false, "minItems": 2}
        },
        "required": ["age", "nick", "tags", "addr", "tree", "pair"]
    });
    check_walks(schema, 15);
}
