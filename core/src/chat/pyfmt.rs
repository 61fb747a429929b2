//! Python-compatible text forms of template values: `json.dumps` (for the `tojson` filter) and
//! `str()` / `repr()` (for `{{ value }}` output).
//!
//! Chat templates are written against Python's Jinja2 as Hugging Face `transformers` sets it up.
//! Its `tojson` filter is `json.dumps(x, ensure_ascii=False, indent=indent,
//! separators=separators, sort_keys=sort_keys)` — no HTML escaping, `", "` / `": "` separators —
//! and printing a value writes Python's `str()` of it (`None`, `True`, `['a', 'b']`). MiniJinja's
//! defaults differ in each of these, and a single byte of difference changes the prompt tokens,
//! so this module reproduces the Python forms exactly.

use std::fmt::Write;

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value};

/// Options of Python's `json.dumps` that chat templates use.
#[derive(Clone, Debug, Default)]
pub struct JsonOptions {
    /// Escape every non-ASCII character as `\uXXXX` (transformers' default is `false`).
    pub ensure_ascii: bool,
    /// `None`: one line. `Some(s)`: pretty-print, `s` repeated once per nesting level.
    pub indent: Option<String>,
    /// Item and key separators; `None` gives Python's defaults, which depend on `indent`.
    pub separators: Option<(String, String)>,
    pub sort_keys: bool,
}

/// `json.dumps(value, ...)` with the given options.
pub fn dumps(value: &Value, opts: &JsonOptions) -> Result<String, Error> {
    let (item_sep, key_sep) = match &opts.separators {
        Some((i, k)) => (i.clone(), k.clone()),
        // Python drops the space after "," when indenting, so lines carry no trailing blanks.
        None if opts.indent.is_some() => (",".to_string(), ": ".to_string()),
        None => (", ".to_string(), ": ".to_string()),
    };
    let mut w = JsonWriter {
        opts,
        item_sep,
        key_sep,
        out: String::new(),
    };
    w.value(value, 0)?;
    Ok(w.out)
}

struct JsonWriter<'a> {
    opts: &'a JsonOptions,
    item_sep: String,
    key_sep: String,
    out: String,
}

impl JsonWriter<'_> {
    fn newline(&mut self, depth: usize) {
        if let Some(ind) = &self.opts.indent {
            self.out.push('\n');
            for _ in 0..depth {
                self.out.push_str(ind);
            }
        }
    }

    fn value(&mut self, v: &Value, depth: usize) -> Result<(), Error> {
        match v.kind() {
            ValueKind::None => self.out.push_str("null"),
            ValueKind::Bool => self
                .out
                .push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number => self.out.push_str(&json_number(v)?),
            ValueKind::String => json_string(
                &mut self.out,
                v.as_str().unwrap_or(""),
                self.opts.ensure_ascii,
            ),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = v.try_iter()?.collect();
                if items.is_empty() {
                    self.out.push_str("[]");
                    return Ok(());
                }
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        let sep = self.item_sep.clone();
                        self.out.push_str(&sep);
                    }
                    self.newline(depth + 1);
                    self.value(item, depth + 1)?;
                }
                self.newline(depth);
                self.out.push(']');
            }
            ValueKind::Map => {
                let mut entries = Vec::new();
                for key in v.try_iter()? {
                    let item = v.get_item(&key)?;
                    entries.push((json_key(&key)?, item));
                }
                if self.opts.sort_keys {
                    entries.sort_by(|a, b| a.0.cmp(&b.0));
                }
                if entries.is_empty() {
                    self.out.push_str("{}");
                    return Ok(());
                }
                self.out.push('{');
                for (i, (key, item)) in entries.iter().enumerate() {
                    if i > 0 {
                        let sep = self.item_sep.clone();
                        self.out.push_str(&sep);
                    }
                    self.newline(depth + 1);
                    json_string(&mut self.out, key, self.opts.ensure_ascii);
                    let sep = self.key_sep.clone();
                    self.out.push_str(&sep);
                    self.value(item, depth + 1)?;
                }
                self.newline(depth);
                self.out.push('}');
            }
            kind => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: a value of type {kind} is not JSON serializable"),
                ))
            }
        }
        Ok(())
    }
}

/// Python converts int, float, bool and None keys to strings; anything else is a TypeError.
fn json_key(key: &Value) -> Result<String, Error> {
    match key.kind() {
        ValueKind::String => Ok(key.as_str().unwrap_or("").to_string()),
        ValueKind::Number => json_number(key),
        ValueKind::Bool => Ok(if key.is_true() { "true" } else { "false" }.into()),
        ValueKind::None => Ok("null".into()),
        kind => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson: keys must be str, int, float, bool or None, not {kind}"),
        )),
    }
}

fn json_number(v: &Value) -> Result<String, Error> {
    if v.is_integer() {
        if let Ok(i) = i128::try_from(v.clone()) {
            return Ok(i.to_string());
        }
        if let Ok(u) = u128::try_from(v.clone()) {
            return Ok(u.to_string());
        }
    }
    let f = f64::try_from(v.clone())?;
    Ok(if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        float_repr(f)
    })
}

/// Writes a JSON string literal the way Python's `json` module does.
fn json_string(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            // With ensure_ascii Python escapes everything outside ' '..='~', DEL included.
            c if ensure_ascii && !(' '..='~').contains(&c) => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr(float)`: the shortest digits that round-trip, in fixed notation when the
/// decimal exponent is in [-4, 16), otherwise as `1e-05` / `1.5e+16`.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` prints the shortest round-trip digits, e.g. "-1.25e-5".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // Python's `decpt`: the value is 0.DIGITS * 10^decpt.
    let decpt = exp + 1;
    let n = digits.len() as i32;
    let body = if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            format!("0.{}{digits}", "0".repeat((-decpt) as usize))
        } else if decpt >= n {
            format!("{digits}{}.0", "0".repeat((decpt - n) as usize))
        } else {
            let (a, b) = digits.split_at(decpt as usize);
            format!("{a}.{b}")
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let e = decpt - 1;
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        format!(
            "{first}{frac}e{}{:02}",
            if e < 0 { '-' } else { '+' },
            e.abs()
        )
    };
    format!("{sign}{body}")
}

/// Python's `str(value)`, which is what Jinja2 writes for `{{ value }}`.
pub fn py_str(v: &Value) -> String {
    match v.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::String => v.as_str().unwrap_or("").to_string(),
        _ => py_repr(v),
    }
}

/// Python's `repr(value)` for the types a template sees (containers print their items' repr).
pub fn py_repr(v: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, v);
    out
}

fn write_repr(out: &mut String, v: &Value) {
    match v.kind() {
        ValueKind::Undefined => {}
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::Number => {
            let s = if v.is_integer() {
                v.to_string()
            } else {
                f64::try_from(v.clone()).map_or_else(|_| v.to_string(), float_repr)
            };
            out.push_str(&s);
        }
        ValueKind::String => str_repr(out, v.as_str().unwrap_or("")),
        ValueKind::Seq => {
            out.push('[');
            if let Ok(items) = v.try_iter() {
                for (i, item) in items.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_repr(out, &item);
                }
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            if let Ok(keys) = v.try_iter() {
                for (i, key) in keys.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_repr(out, &key);
                    out.push_str(": ");
                    write_repr(out, &v.get_item(&key).unwrap_or_default());
                }
            }
            out.push('}');
        }
        _ => out.push_str(&v.to_string()),
    }
}

/// Python's `repr(str)`: single quotes unless the text has `'` and no `"`; non-printable
/// characters escaped. "Printable" follows Python's definition closely for the characters chat
/// text contains (controls, separators and format characters are escaped).
fn str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !py_printable(c) => {
                let cp = c as u32;
                let _ = if cp < 0x100 {
                    write!(out, "\\x{cp:02x}")
                } else if cp < 0x10000 {
                    write!(out, "\\u{cp:04x}")
                } else {
                    write!(out, "\\U{cp:08x}")
                };
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

fn py_printable(c: char) -> bool {
    let cp = c as u32;
    !(c.is_control()
        || cp == 0xa0
        || cp == 0xad
        || (0x2000..=0x200f).contains(&cp)
        || (0x2028..=0x202f).contains(&cp)
        || (0x205f..=0x206f).contains(&cp)
        || cp == 0x3000
        || cp == 0xfeff
        || (0xd800..=0xdfff).contains(&cp)
        || (0xe000..=0xf8ff).contains(&cp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        // Expected strings are Python 3's repr() of the same floats.
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1.5e16, "1.5e+16"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.25e-7, "1.25e-07"),
            (123456.789, "123456.789"),
            (1e100, "1e+100"),
            (-0.0, "-0.0"),
            (1.0 / 3.0, "0.3333333333333333"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f), want, "repr({f:e})");
        }
    }

    #[test]
    fn dumps_matches_python_defaults_and_indent() {
        let v = Value::from(minijinja::value::Serde(serde_json::json!({
            "b": [1, 2.0, "x\"y\n\u{1}é"], "a": {}, "c": [], "d": null, "e": true
        })));
        let s = dumps(&v, &JsonOptions::default()).unwrap();
        assert_eq!(
            s,
            r#"{"b": [1, 2.0, "x\"y\n\u0001é"], "a": {}, "c": [], "d": null, "e": true}"#
        );
        let opts = JsonOptions {
            ensure_ascii: true,
            indent: Some("  ".into()),
            sort_keys: true,
            separators: None,
        };
        let s = dumps(&v, &opts).unwrap();
        assert_eq!(
            s,
            "{\n  \"a\": {},\n  \"b\": [\n    1,\n    2.0,\n    \"x\\\"y\\n\\u0001\\u00e9\"\n  ],\n  \"c\": [],\n  \"d\": null,\n  \"e\": true\n}"
        );
    }

    #[test]
    fn repr_matches_python() {
        let v = Value::from(minijinja::value::Serde(
            serde_json::json!(["it's", "a", 1, 1.5, null, true, {"k": "v"}]),
        ));
        assert_eq!(
            py_str(&v),
            r#"["it's", 'a', 1, 1.5, None, True, {'k': 'v'}]"#
        );
        assert_eq!(py_str(&Value::from("plain")), "plain");
    }
}
