//! Built-in chat templates, for model files that carry no `tokenizer.chat_template` (the Gemma 3
//! base model, for one).
//!
//! The templates here are written for Weft from the families' documented turn formats. They
//! leave the BOS token out: every family below has its tokenizer add BOS itself
//! (`tokenizer.ggml.add_bos_token`), and writing it twice would change the prompt.

use crate::gguf::Gguf;

/// Gemma (1, 2, 3): `<start_of_turn>{user|model}\n{text}<end_of_turn>\n`. Gemma has no system
/// role; a system message becomes a paragraph in front of the first user turn, as Google's
/// format prescribes. Turn text is trimmed of surrounding whitespace.
pub const GEMMA: &str = r#"
{%- set ns = namespace(prefix="") -%}
{%- set turns = messages -%}
{%- if messages and messages[0].role == "system" -%}
  {%- set ns.prefix = messages[0].content | trim ~ "\n\n" -%}
  {%- set turns = messages[1:] -%}
{%- endif -%}
{%- for m in turns -%}
  {%- if m.role == "assistant" or m.role == "model" -%}
    {%- set role = "model" -%}
  {%- elif m.role == "user" or m.role == "tool" -%}
    {%- set role = "user" -%}
  {%- else -%}
    {{- raise_exception("Gemma templates know the roles system, user and assistant, not " ~ m.role) -}}
  {%- endif -%}
  {{- "<start_of_turn>" ~ role ~ "\n" -}}
  {%- if loop.first -%}{{- ns.prefix -}}{%- endif -%}
  {{- (m.content or "") | trim -}}
  {{- "<end_of_turn>\n" -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- "<start_of_turn>model\n" -}}
{%- endif -%}
"#;

/// ChatML (Qwen, SmolLM and many fine-tunes): `<|im_start|>{role}\n{text}<|im_end|>\n`.
pub const CHATML: &str = r#"
{%- for m in messages -%}
  {{- "<|im_start|>" ~ m.role ~ "\n" ~ (m.content or "") ~ "<|im_end|>\n" -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- "<|im_start|>assistant\n" -}}
{%- endif -%}
"#;

/// Llama 3: `<|start_header_id|>{role}<|end_header_id|>\n\n{text}<|eot_id|>`.
pub const LLAMA3: &str = r#"
{%- for m in messages -%}
  {{- "<|start_header_id|>" ~ m.role ~ "<|end_header_id|>\n\n" ~ (m.content or "") | trim ~ "<|eot_id|>" -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- "<|start_header_id|>assistant<|end_header_id|>\n\n" -}}
{%- endif -%}
"#;

/// Built-in templates by name.
pub const BUILTINS: &[(&str, &str)] = &[("gemma", GEMMA), ("chatml", CHATML), ("llama3", LLAMA3)];

/// Looks a built-in template up by name (`gemma`, `chatml`, `llama3`).
pub fn builtin(name: &str) -> Option<&'static str> {
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Which built-in fits a model file: by architecture first, then by the turn-marker tokens its
/// vocabulary holds. None when neither says anything.
pub fn detect(gguf: &Gguf) -> Option<&'static str> {
    let arch = gguf.architecture().unwrap_or("");
    if arch.starts_with("gemma") {
        return Some("gemma");
    }
    if arch.starts_with("qwen") {
        return Some("chatml");
    }
    let tokens = gguf.get_array("tokenizer.ggml.tokens")?;
    let has = |piece: &str| tokens.iter().any(|t| t.as_str() == Some(piece));
    if has("<start_of_turn>") && has("<end_of_turn>") {
        Some("gemma")
    } else if has("<|im_start|>") && has("<|im_end|>") {
        Some("chatml")
    } else if has("<|start_header_id|>") && has("<|eot_id|>") {
        Some("llama3")
    } else {
        None
    }
}
