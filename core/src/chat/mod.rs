//! Chat templates: rendering `tokenizer.chat_template` (Jinja) with messages and tools.
//!
//! [`ChatTemplate::from_gguf`] takes the model file's template (or a built-in one for families
//! whose files carry none, such as the Gemma 3 base model) and [`ChatTemplate::render`] turns
//! OpenAI-style [`Message`]s into the prompt text, byte for byte as Hugging Face
//! `transformers`' `apply_chat_template` renders it with Python's Jinja2.

mod builtin;
mod clock;
mod message;
mod pyfmt;
mod template;

use thiserror::Error;

pub use builtin::{builtin, detect as detect_builtin, BUILTINS};
pub use clock::strftime;
pub use message::{Content, ContentPart, FunctionCall, Message, ToolCall};
pub use pyfmt::{dumps as python_json_dumps, float_repr as python_float_repr, JsonOptions};
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
