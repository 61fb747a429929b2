//! [`ChatTemplate`]: a compiled chat template and its rendering.

use minijinja::value::{Kwargs, Serde};
use minijinja::{Environment, Error, ErrorKind, UndefinedBehavior, Value};
use serde_json::{Map, Value as Json};

use super::pyfmt::{self, JsonOptions};
use super::{builtin, clock, ChatError, Message, THINK_OPEN};
use crate::gguf::Gguf;

const NAME: &str = "chat_template";

/// Render budget: MiniJinja "fuel" units (about one per instruction). Real templates need a few
/// thousand per message; the cap only stops a malicious file's endless loop.
const FUEL: u64 = 20_000_000;

/// Where a template came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateOrigin {
    /// `tokenizer.chat_template` of the model file.
    File,
    /// A built-in template, by name (see [`builtin::BUILTINS`]).
    Builtin(&'static str),
    /// Given by the caller.
    Custom,
}

/// A compiled chat template plus the special-token strings it may reference.
///
/// Rendering follows Hugging Face `transformers`' `apply_chat_template`: Jinja2 semantics with
/// `trim_blocks` and `lstrip_blocks`, the loop-controls extension, `raise_exception`,
/// `strftime_now`, and a `tojson` filter equal to `json.dumps(x, ensure_ascii=False, indent=…,
/// separators=…, sort_keys=…)`. Printed values use Python's `str()` (`None`, `True`).
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    origin: TemplateOrigin,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("origin", &self.origin)
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish()
    }
}

impl ChatTemplate {
    /// Compiles a template source. `bos_token` / `eos_token` are the strings the template sees.
    pub fn new(
        source: &str,
        bos_token: impl Into<String>,
        eos_token: impl Into<String>,
    ) -> Result<Self, ChatError> {
        Self::build(
            source.to_string(),
            TemplateOrigin::Custom,
            bos_token.into(),
            eos_token.into(),
        )
    }

    /// The model file's own template, or the built-in one for its family when it has none
    /// (Gemma 3 base). Fails with a clear message when neither exists.
    pub fn from_gguf(gguf: &Gguf) -> Result<Self, ChatError> {
        let bos = special_token(gguf, "bos");
        let eos = special_token(gguf, "eos");
        if let Some(src) = gguf.get_str("tokenizer.chat_template") {
            return Self::build(src.to_string(), TemplateOrigin::File, bos, eos);
        }
        match builtin::detect(gguf) {
            Some(name) => Self::builtin_with(name, bos, eos),
            None => Err(ChatError::NoTemplate(format!(
                "the model file has no tokenizer.chat_template and Weft has no built-in template \
                 for its family (architecture {:?}); supply a template explicitly (built-ins: {})",
                gguf.architecture().unwrap_or("unknown"),
                builtin_names()
            ))),
        }
    }

    /// A built-in template by name (`gemma`, `chatml`, `llama3`), with the given token strings.
    pub fn builtin_with(
        name: &str,
        bos_token: impl Into<String>,
        eos_token: impl Into<String>,
    ) -> Result<Self, ChatError> {
        let (name, src) = builtin::BUILTINS
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| {
                ChatError::NoTemplate(format!(
                    "no built-in chat template named {name:?} (built-ins: {})",
                    builtin_names()
                ))
            })?;
        Self::build(
            src.to_string(),
            TemplateOrigin::Builtin(name),
            bos_token.into(),
            eos_token.into(),
        )
    }

    /// Fixes the time `strftime_now` reports (Unix seconds, UTC). Needed on
    /// `wasm32-unknown-unknown`, which has no clock; also makes renders reproducible.
    pub fn with_now(mut self, unix_secs: i64) -> Self {
        self.env.add_function("strftime_now", move |fmt: String| {
            clock::strftime(&fmt, unix_secs).map_err(|e| Error::new(ErrorKind::InvalidOperation, e))
        });
        self
    }

    pub fn origin(&self) -> &TemplateOrigin {
        &self.origin
    }

    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    pub fn eos_token(&self) -> &str {
        &self.eos_token
    }

    /// The template source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the model writes its reasoning between `<think>` and `</think>` (Qwen3- and
    /// DeepSeek-R1-style templates name the tags, to open the block or to strip past reasoning).
    pub fn marks_reasoning(&self) -> bool {
        self.source.contains(THINK_OPEN)
    }

    /// Whether reasoning can be switched on and off with the `enable_thinking` variable.
    pub fn switches_reasoning(&self) -> bool {
        self.source.contains("enable_thinking")
    }

    /// Renders a conversation into the prompt text.
    ///
    /// `tools` are OpenAI-style tool definitions, passed to the template as `tools` (`None`
    /// when absent, as transformers does). `extra` (a JSON object) adds or overrides template
    /// variables, e.g. `{"enable_thinking": false}`.
    pub fn render(
        &self,
        messages: &[Message],
        tools: Option<&[Json]>,
        add_generation_prompt: bool,
        extra: Option<Json>,
    ) -> Result<String, ChatError> {
        let msgs = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                m.to_template_json().map_err(|e| match e {
                    ChatError::Input(s) => ChatError::Input(format!("message {i}: {s}")),
                    e => e,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.render_json(&msgs, tools, add_generation_prompt, extra)
    }

    /// Like [`render`](Self::render), with messages already in the dictionary form templates
    /// expect (used to pass message fields Weft does not model).
    pub fn render_json(
        &self,
        messages: &[Json],
        tools: Option<&[Json]>,
        add_generation_prompt: bool,
        extra: Option<Json>,
    ) -> Result<String, ChatError> {
        let mut ctx = Map::new();
        ctx.insert("bos_token".into(), Json::String(self.bos_token.clone()));
        ctx.insert("eos_token".into(), Json::String(self.eos_token.clone()));
        match extra {
            None | Some(Json::Null) => {}
            Some(Json::Object(m)) => ctx.extend(m),
            Some(other) => {
                return Err(ChatError::Input(format!(
                    "extra template variables must be a JSON object, got {other}"
                )))
            }
        }
        ctx.insert("messages".into(), Json::Array(messages.to_vec()));
        ctx.insert(
            "tools".into(),
            tools.map_or(Json::Null, |t| Json::Array(t.to_vec())),
        );
        ctx.insert(
            "add_generation_prompt".into(),
            Json::Bool(add_generation_prompt),
        );
        let tmpl = self
            .env
            .get_template(NAME)
            .map_err(|e| ChatError::Render(describe(&e)))?;
        tmpl.render(Value::from(Serde(Json::Object(ctx))))
            .map_err(|e| ChatError::Render(describe(&e)))
    }

    fn build(
        source: String,
        origin: TemplateOrigin,
        bos_token: String,
        eos_token: String,
    ) -> Result<Self, ChatError> {
        let mut env = Environment::new();
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .map_err(|e| ChatError::Compile(describe(&e)))?,
        );
        // Jinja2's default: printing an undefined value gives "", using it in most other ways
        // fails.
        env.set_undefined_behavior(UndefinedBehavior::Lenient);
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_fuel(Some(FUEL));
        env.set_formatter(|out, _state, value| {
            out.write_str(&pyfmt::py_str(value))
                .map_err(|_| Error::new(ErrorKind::WriteFailure, "cannot write output"))
        });
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", |msg: String| -> Result<Value, Error> {
            Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("the template raised an exception: {msg}"),
            ))
        });
        env.add_function("strftime_now", |fmt: String| {
            clock::unix_now()
                .and_then(|now| clock::strftime(&fmt, now))
                .map_err(|e| Error::new(ErrorKind::InvalidOperation, e))
        });
        env.add_template_owned(NAME, source.clone())
            .map_err(|e| ChatError::Compile(describe(&e)))?;
        Ok(ChatTemplate {
            env,
            source,
            origin,
            bos_token,
            eos_token,
        })
    }
}

fn builtin_names() -> String {
    builtin::BUILTINS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The text of a special token (`bos`, `eos`) from the file's vocabulary, or "" when the file
/// names none.
fn special_token(gguf: &Gguf, which: &str) -> String {
    let id = gguf.get_u64(&format!("tokenizer.ggml.{which}_token_id"));
    let tokens = gguf.get_array("tokenizer.ggml.tokens");
    match (id, tokens) {
        (Some(id), Some(tokens)) => tokens
            .get(id as usize)
            .and_then(|t| t.as_str())
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

/// An error with its causes, and the template line where MiniJinja knows it.
fn describe(e: &Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(cause) = src {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        src = cause.source();
    }
    s
}

/// transformers' `tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`,
/// positional or keyword.
fn tojson(
    value: &Value,
    ensure_ascii: Option<Value>,
    indent: Option<Value>,
    separators: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let arg = |pos: Option<Value>, name: &str| -> Result<Option<Value>, Error> {
        let kw: Option<Value> = kwargs.get(name)?;
        match (pos, kw) {
            (Some(_), Some(_)) => Err(Error::new(
                ErrorKind::TooManyArguments,
                format!("tojson: {name} given twice"),
            )),
            (p, k) => Ok(p.or(k).filter(|v| !v.is_none() && !v.is_undefined())),
        }
    };
    let ensure_ascii = arg(ensure_ascii, "ensure_ascii")?;
    let indent = arg(indent, "indent")?;
    let separators = arg(separators, "separators")?;
    let sort_keys: Option<Value> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;

    let mut opts = JsonOptions {
        ensure_ascii: ensure_ascii.is_some_and(|v| v.is_true()),
        sort_keys: sort_keys.is_some_and(|v| v.is_true()),
        ..Default::default()
    };
    opts.indent = match indent {
        None => None,
        Some(v) if v.as_str().is_some() => v.as_str().map(str::to_string),
        Some(v) => {
            // Python repeats " " indent times; zero or negative means newlines only.
            let n = i64::try_from(v.clone()).map_err(|_| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: indent must be an int or a string, not {v}"),
                )
            })?;
            Some(" ".repeat(n.max(0) as usize))
        }
    };
    if let Some(sep) = separators {
        let parts: Vec<Value> = sep.try_iter()?.collect();
        match parts.as_slice() {
            [a, b] if a.as_str().is_some() && b.as_str().is_some() => {
                opts.separators = Some((
                    a.as_str().unwrap_or_default().to_string(),
                    b.as_str().unwrap_or_default().to_string(),
                ));
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: separators must be a pair of strings",
                ))
            }
        }
    }
    let text = pyfmt::dumps(value, &opts)?;
    // Marked safe so autoescaping (never on here) would leave it alone, as Jinja2 does.
    Ok(Value::from_safe_string(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(src: &str, extra: Json) -> Result<String, ChatError> {
        ChatTemplate::new(src, "<s>", "</s>")?.render(&[], None, false, Some(extra))
    }

    #[test]
    fn python_flavoured_output() {
        let out = render(
            "{{ a }}|{{ b }}|{{ c }}|{{ d }}|{{ e }}|{{ missing }}",
            json!({"a": null, "b": true, "c": [1, "x"], "d": 0.00001, "e": {"k": false}}),
        )
        .unwrap();
        assert_eq!(out, "None|True|[1, 'x']|1e-05|{'k': False}|");
    }

    #[test]
    fn tojson_forms() {
        let x = json!({"b": "é<&>'", "a": [1, 2]});
        let cases = [
            ("{{ x | tojson }}", r#"{"b": "é<&>'", "a": [1, 2]}"#),
            (
                "{{ x | tojson(true) }}",
                r#"{"b": "\u00e9<&>'", "a": [1, 2]}"#,
            ),
            (
                "{{ x | tojson(indent=1, sort_keys=true) }}",
                "{\n \"a\": [\n  1,\n  2\n ],\n \"b\": \"é<&>'\"\n}",
            ),
            (
                "{{ x | tojson(separators=(',', ':')) }}",
                r#"{"b":"é<&>'","a":[1,2]}"#,
            ),
        ];
        for (src, want) in cases {
            assert_eq!(render(src, json!({ "x": x })).unwrap(), want, "{src}");
        }
        let e = render("{{ x | tojson(bogus=1) }}", json!({"x": 1})).unwrap_err();
        assert!(matches!(e, ChatError::Render(_)), "{e}");
    }

    #[test]
    fn whitespace_control_is_jinja2s() {
        // trim_blocks eats the newline after a block tag; lstrip_blocks the indent before it.
        let src = "{% for m in messages %}\n    {% if true %}\n[{{ m }}]\n    {% endif %}\n{% endfor %}\n";
        let t = ChatTemplate::new(src, "", "").unwrap();
        let out = t
            .render_json(&[json!("a"), json!("b")], None, false, None)
            .unwrap();
        assert_eq!(out, "[a]\n[b]\n");
    }

    #[test]
    fn errors_are_reported_not_panics() {
        let e = ChatTemplate::new("{% for x in %}", "", "").unwrap_err();
        assert!(matches!(e, ChatError::Compile(_)), "{e}");
        let e = render("{{ raise_exception('bad roles') }}", json!({})).unwrap_err();
        assert!(e.to_string().contains("bad roles"), "{e}");
        let e = render("{{ missing.attr }}", json!({})).unwrap_err();
        assert!(matches!(e, ChatError::Render(_)), "{e}");
        let e = render(
            "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",
            json!({}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("fuel"), "{e}");
        let e = ChatTemplate::new("x", "", "")
            .unwrap()
            .render(&[], None, false, Some(json!([1])))
            .unwrap_err();
        assert!(matches!(e, ChatError::Input(_)), "{e}");
    }

    #[test]
    fn context_variables_and_clock() {
        let t = ChatTemplate::new(
            "{{ bos_token }}{{ messages[0].content.strip() }}{{ tools }}{{ add_generation_prompt }}\
             {{ flag }}{{ strftime_now('%d %b %Y') }}{{ eos_token }}",
            "<s>",
            "</s>",
        )
        .unwrap()
        .with_now(1_709_211_909);
        let out = t
            .render(
                &[Message::user(" hi ")],
                None,
                true,
                Some(json!({"flag": 7})),
            )
            .unwrap();
        assert_eq!(out, "<s>hiNoneTrue729 Feb 2024</s>");
    }

    #[test]
    fn template_can_be_shared_between_threads() {
        fn is_send_sync<T: Send + Sync>() {}
        is_send_sync::<ChatTemplate>();
    }

    #[test]
    fn unknown_builtin_is_an_error() {
        let e = ChatTemplate::builtin_with("nope", "", "").unwrap_err();
        assert!(e.to_string().contains("chatml"), "{e}");
    }
}
