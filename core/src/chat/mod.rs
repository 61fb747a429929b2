//! Chat templates: rendering `tokenizer.chat_template` (Jinja) with messages and tools.
//!
//! [`ChatTemplate::from_gguf`] takes the model file's template (or a built-in one for families
//! whose files carry none, such as the Gemma 3 base model) and [`ChatTemplate::render`] turns
//! OpenAI-style [`Message`]s into the prompt text, byte for byte as Hugging Face
//! `transformers`' `apply_chat_template` renders it with Python's Jinja2.
//!
//! Which Jinja2: templates are written for transformers' environment, not plain Jinja2.
//! Plain Jinja2's `tojson` sorts keys, escapes non-ASCII and HTML-escapes `<`, `>`, `&`, `'`
//! (as `\u003c` ...); transformers replaces it with `json.dumps(x, ensure_ascii=False,
//! indent=indent, separators=separators, sort_keys=sort_keys)`, so tool definitions keep their
//! key order and characters. Weft follows transformers: that `tojson`, `trim_blocks`,
//! `lstrip_blocks`, loop controls, `raise_exception` and `strftime_now` (UTC here).
//! `tests/py/render_chat.py` builds the same environment with Jinja2, and the tests compare
//! renders byte for byte.
//!
//! BOS: built-in templates leave it out because those families' tokenizers add it; a file's own
//! template gets `bos_token` / `eos_token` and decides itself.

mod builtin;
mod clock;
mod message;
mod pyfmt;
mod reasoning;
mod template;

use thiserror::Error;

pub use builtin::{builtin, detect as detect_builtin, BUILTINS};
pub use clock::strftime;
pub use message::{Content, ContentPart, FunctionCall, Message, ToolCall};
pub use pyfmt::{dumps as python_json_dumps, float_repr as python_float_repr, JsonOptions};
pub use reasoning::{opens_reasoning, ReasoningSplitter, THINK_CLOSE, THINK_OPEN};
pub use template::{ChatTemplate, TemplateOrigin};

/// Why a chat could not be rendered.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ChatError {
    /// No template is available for the model.
    #[error("no chat template: {0}")]
    NoTemplate(String),
    /// The template source is not valid Jinja.
    #[error("chat template does not compile: {0}")]
    Compile(String),
    /// Rendering failed (including `raise_exception` called by the template).
    #[error("chat template failed to render: {0}")]
    Render(String),
    /// The messages or options given are unusable.
    #[error("invalid chat input: {0}")]
    Input(String),
}
