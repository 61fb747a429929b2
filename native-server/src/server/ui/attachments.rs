//! Uploaded files in a chat-UI `/api/chat` request.
//!
//! **The server inlines.** A message's `textFilePaths` (stored names from `POST /api/upload`,
//! or a top-level `textFilePaths`, which belongs to the last user message) are replaced by the
//! files' text, each as `[File: NAME]\n...\n[End of file]`, before the user's own words. The
//! text is read from the session's uploads, never taken from the client, so the bundled page
//! sends only the names. A client that already inlined a file (the peer protocol's UI does:
//! its message contains `[File: NAME]` for that file) is left as it is, so such clients work
//! unchanged.
//!
//! A message's `imagePaths` (with `isVideo: true`: a video upload's frames) become image parts
//! of that message (`image_paths.rs`); the chat handler then treats them as any image, and a
//! model without a vision projector refuses them (400 `vision_not_supported`). `audioPaths` is
//! a 400: no served model takes audio.
//!
//! This works on the raw JSON body, before it is parsed into the request type, so the chat
//! handler itself does not change.

use serde_json::Value;

use crate::server::conversations::default_session;
use crate::server::error::ApiError;
use crate::server::ui::{image_paths, UiState};
use crate::server::uploads::store::Store;

/// The header and footer around an inlined file.
pub fn file_block(name: &str, text: &str) -> String {
    format!("[File: {name}]\n{}\n[End of file]", text.trim_end())
}

fn non_empty(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Bool(b)) => *b,
        _ => false,
    }
}

/// The request body with its files inlined and its images attached (unchanged when it names
/// none); only `owner`'s uploads are found.
pub async fn apply(st: &UiState, owner: &str, mut v: Value) -> Result<Value, ApiError> {
    let audio = |o: &Value| non_empty(o.get("audioPaths"));
    if audio(&v)
        || v.get("messages")
            .and_then(Value::as_array)
            .is_some_and(|ms| ms.iter().any(audio))
    {
        return Err(ApiError::invalid(
            "audio input is not supported by the loaded model",
        ));
    }
    let obj = v.as_object_mut();
    let (top, top_images, top_video) = match obj {
        Some(o) => (
            o.remove("textFilePaths").filter(|p| non_empty(Some(p))),
            o.remove("imagePaths").filter(|p| non_empty(Some(p))),
            non_empty(o.remove("isVideo").as_ref()),
        ),
        None => (None, None, false),
    };
    if top_video && top_images.is_none() {
        return Err(ApiError::invalid(
            "isVideo needs the video's frames in imagePaths (the upload reply's frames)",
        ));
    }
    let in_messages = |k: &str| {
        v.get("messages")
            .and_then(Value::as_array)
            .is_some_and(|ms| ms.iter().any(|m| non_empty(m.get(k))))
    };
    let has_paths = top.is_some() || in_messages("textFilePaths");
    let has_images = top_images.is_some() || in_messages("imagePaths") || in_messages("isVideo");
    if !has_paths && !has_images {
        return Ok(v);
    }
    let sid = v
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| default_session(owner));
    let store = st.uploads.store.clone();
    let owner = owner.to_string();
    let job = move || {
        let mut v = if has_paths {
            inline_all(&store, &owner, &sid, v, top)?
        } else {
            v
        };
        if has_images {
            let Some(messages) = v.get_mut("messages").and_then(Value::as_array_mut) else {
                return Err(ApiError::invalid(
                    "imagePaths needs a user message to attach the images to",
                ));
            };
            image_paths::attach(&store, &owner, &sid, messages, top_images, top_video)?;
        }
        Ok(v)
    };
    tokio::task::spawn_blocking(job)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
}

fn inline_all(
    store: &Store,
    owner: &str,
    sid: &str,
    mut v: Value,
    top: Option<Value>,
) -> Result<Value, ApiError> {
    let Some(messages) = v.get_mut("messages").and_then(Value::as_array_mut) else {
        return Err(ApiError::invalid(
            "textFilePaths needs a user message to attach the files to",
        ));
    };
    if let Some(top) = top {
        let last_user = messages
            .iter_mut()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .ok_or_else(|| {
                ApiError::invalid("textFilePaths needs a user message to attach the files to")
            })?;
        let mut paths = upload_names("textFilePaths", last_user.get("textFilePaths"))?;
        paths.extend(upload_names("textFilePaths", Some(&top))?);
        last_user["textFilePaths"] = Value::from(paths);
    }
    for m in messages.iter_mut() {
        let paths = upload_names("textFilePaths", m.get("textFilePaths"))?;
        if paths.is_empty() {
            continue;
        }
        let current = match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        let mut blocks = Vec::new();
        for name in &paths {
            let (meta, text) = store.text(owner, sid, name).ok_or_else(|| {
                ApiError::invalid(format!(
                    "textFilePaths: no upload {name:?} in this session (upload it with POST \
                     /api/upload and the same sessionId)"
                ))
            })?;
            if current.contains(&format!("[File: {}]", meta.file_name)) {
                continue;
            }
            let text = text.ok_or_else(|| {
                ApiError::invalid(if meta.kind == "image" {
                    format!(
                        "{:?} is an image: pass it in imagePaths, not textFilePaths",
                        meta.file_name
                    )
                } else {
                    format!(
                        "{:?} has no text layer; only a vision model could read it, and none is \
                         served",
                        meta.file_name
                    )
                })
            })?;
            blocks.push(file_block(&meta.file_name, &text));
        }
        if blocks.is_empty() {
            continue;
        }
        let files = blocks.join("\n\n");
        match m.get_mut("content") {
            Some(Value::Array(parts)) => {
                parts.insert(0, serde_json::json!({"type": "text", "text": files}));
            }
            _ if current.is_empty() => m["content"] = Value::from(files),
            _ => m["content"] = Value::from(format!("{files}\n\n{current}")),
        }
    }
    Ok(v)
}

/// The stored names of a `field` value (`textFilePaths`, `imagePaths`: a list of names, or
/// one name).
pub(super) fn upload_names(field: &str, v: Option<&Value>) -> Result<Vec<String>, ApiError> {
    let bad = || ApiError::invalid(format!("{field} must be a list of upload names (strings)"));
    match v {
        None | Some(Value::Null) => Ok(vec![]),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}
