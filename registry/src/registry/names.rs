//! Model names: what a client may call a model, and how a requested name is normalised.
//!
//! Ollama clients send `name:tag` and list models as `name:latest`; OpenAI clients send the
//! bare id. A name is stored without a `:latest` tag, so `qwen`, `qwen:latest` and `qwen.gguf`
//! all reach the same model.

use super::error::RegistryError;

/// The longest name accepted.
const MAX_LEN: usize = 200;

/// Checks a name a client wants to create (`/api/create`, `/api/copy`, an alias): letters,
/// digits and `._-:` only, so a name can never be a path (`/`, `..`) or carry control bytes.
pub fn check_new(name: &str) -> Result<String, RegistryError> {
    let n = normalise(name);
    let bad = |why: &str| RegistryError::invalid(format!("invalid model name {name:?}: {why}"));
    if n.is_empty() {
        return Err(bad("it is empty"));
    }
    if n.len() > MAX_LEN {
        return Err(bad(&format!("it is longer than {MAX_LEN} bytes")));
    }
    if n.contains("..") || n.starts_with('.') {
        return Err(bad("it may not start with '.' or contain '..'"));
    }
    if let Some(c) = n
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':')))
    {
        return Err(bad(&format!(
            "{c:?} is not allowed (use letters, digits, '.', '_', '-' and one ':tag')"
        )));
    }
    if n.matches(':').count() > 1 || n.ends_with(':') || n.starts_with(':') {
        return Err(bad("use at most one ':' followed by a tag"));
    }
    Ok(n)
}

/// The stored form of a requested name: trimmed, without `:latest` and without `.gguf`.
pub fn normalise(name: &str) -> String {
    let n = name.trim();
    let n = n.strip_suffix(":latest").unwrap_or(n);
    let n = n.strip_suffix(".gguf").unwrap_or(n);
    n.to_string()
}

/// The name a GGUF file is served by: its file name without `.gguf`.
pub fn from_file(path: &std::path::Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into())
}

/// How Ollama lists a name: with a tag (`:latest` when it has none).
pub fn tagged(name: &str) -> String {
    if name.contains(':') {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_tags_and_extension() {
        assert_eq!(normalise("qwen:latest"), "qwen");
        assert_eq!(normalise("qwen.gguf"), "qwen");
        assert_eq!(normalise(" qwen:v2 "), "qwen:v2");
        assert_eq!(tagged("qwen"), "qwen:latest");
        assert_eq!(tagged("qwen:v2"), "qwen:v2");
    }

    #[test]
    fn refuses_paths_and_odd_characters() {
        for bad in [
            "", "a/b", "../x", "..", ".hidden", "a..b", "a b", "a\nb", "a:b:c", "x:",
        ] {
            assert!(check_new(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(check_new("mario:latest").unwrap(), "mario");
        assert_eq!(check_new("my-model_1.5:q4").unwrap(), "my-model_1.5:q4");
    }
}
