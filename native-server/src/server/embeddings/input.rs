//! The `input` field of the embedding routes: checked and turned into core inputs.

use serde_json::Value;
use weft_core::embed::EmbedInput;

use crate::server::ApiError;

/// Most inputs in one request (OpenAI's limit).
pub const MAX_INPUTS: usize = 2048;

fn too_many(n: usize) -> ApiError {
    ApiError::invalid(format!(
        "input has {n} items; at most {MAX_INPUTS} per request"
    ))
}

fn token_ids(a: &[Value]) -> Option<Vec<u32>> {
    a.iter()
        .map(|v| {
            v.as_u64()
                .filter(|&i| i <= u32::MAX as u64)
                .map(|i| i as u32)
        })
        .collect()
}

/// The rules both APIs share: `input` is required, an array is neither empty nor over
/// [`MAX_INPUTS`], and a string or an array of strings is texts. `Ok(None)`: an array of
/// something else (the caller decides whether it takes it).
fn texts(input: Option<&Value>) -> Result<Option<Vec<EmbedInput>>, ApiError> {
    match input {
        None | Some(Value::Null) => Err(ApiError::invalid("input is required")),
        Some(Value::String(s)) => Ok(Some(vec![EmbedInput::Text(s.clone())])),
        Some(Value::Array(a)) if a.is_empty() => Err(ApiError::invalid("input must not be empty")),
        Some(Value::Array(a)) if a.len() > MAX_INPUTS => Err(too_many(a.len())),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => Ok(Some(
            a.iter()
                .map(|v| EmbedInput::Text(v.as_str().unwrap_or_default().to_string()))
                .collect(),
        )),
        Some(_) => Ok(None),
    }
}

/// OpenAI `input`: a string, an array of strings, an array of token ids, or an array of
/// token-id arrays.
pub fn openai(input: Option<&Value>) -> Result<Vec<EmbedInput>, ApiError> {
    let bad = || {
        ApiError::invalid(
            "input must be a string, an array of strings, an array of token ids, or an array \
             of token-id arrays",
        )
    };
    if let Some(t) = texts(input)? {
        return Ok(t);
    }
    match input {
        Some(Value::Array(a)) if a.iter().all(Value::is_number) => {
            Ok(vec![EmbedInput::Tokens(token_ids(a).ok_or_else(bad)?)])
        }
        Some(Value::Array(a)) if a.iter().all(Value::is_array) => a
            .iter()
            .map(|v| {
                let ids = token_ids(v.as_array().map_or(&[][..], |x| x)).ok_or_else(bad)?;
                if ids.is_empty() {
                    return Err(ApiError::invalid("a token-id array of input is empty"));
                }
                Ok(EmbedInput::Tokens(ids))
            })
            .collect(),
        _ => Err(bad()),
    }
}

/// Ollama `input`: a string or an array of strings.
pub fn ollama(input: Option<&Value>) -> Result<Vec<EmbedInput>, ApiError> {
    texts(input)?.ok_or_else(|| ApiError::invalid("input must be a string or an array of strings"))
}

/// `dimensions`: a positive integer (the model's size is checked by the embedder).
pub fn dimensions(d: Option<i64>) -> Result<Option<usize>, ApiError> {
    match d {
        None => Ok(None),
        Some(n) if n > 0 => Ok(Some(n as usize)),
        Some(n) => Err(ApiError::invalid(format!(
            "dimensions must be a positive integer, got {n}"
        ))),
    }
}
