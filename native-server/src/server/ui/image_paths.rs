//! Uploaded images in a chat-UI `/api/chat` request: a message's `imagePaths` (stored names
//! from `POST /api/upload`) become OpenAI-style `image_url` content parts holding the files as
//! `data:` URIs, after the message's text. The bytes are read from the caller's own session,
//! never taken from the client. From there the chat handler treats them as any other image
//! (`common/images.rs`: bounds, decoding, `vision_not_supported` on a text-only model).
//!
//! `isVideo: true` marks the names as the frames of one video upload (its reply's `frames`):
//! each frame is then preceded by a text part with its time (`common::video::frame_label`), the
//! same layout as an OpenAI `video_url` part.

use base64::Engine as _;
use serde_json::{json, Value};

use crate::server::common::video::frame_label;
use crate::server::error::ApiError;
use crate::server::ui::attachments::upload_names;
use crate::server::uploads::store::Store;

/// Moves a top-level `imagePaths` / `isVideo` onto the last user message (as `textFilePaths`
/// does), then replaces every message's `imagePaths` with image parts.
pub fn attach(
    store: &Store,
    owner: &str,
    sid: &str,
    messages: &mut [Value],
    top_paths: Option<Value>,
    top_video: bool,
) -> Result<(), ApiError> {
    if top_paths.is_some() {
        let last_user = messages
            .iter_mut()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .ok_or_else(|| {
                ApiError::invalid("imagePaths needs a user message to attach the images to")
            })?;
        let mut paths = upload_names("imagePaths", last_user.get("imagePaths"))?;
        paths.extend(upload_names("imagePaths", top_paths.as_ref())?);
        last_user["imagePaths"] = Value::from(paths);
        if top_video {
            last_user["isVideo"] = Value::Bool(true);
        }
    }
    for m in messages.iter_mut() {
        let Some(o) = m.as_object_mut() else {
            continue;
        };
        let paths = upload_names("imagePaths", o.remove("imagePaths").as_ref())?;
        let video = o.remove("isVideo").and_then(|v| v.as_bool()) == Some(true);
        if paths.is_empty() {
            if video {
                return Err(ApiError::invalid(
                    "isVideo needs the video's frames in imagePaths (the upload reply's frames)",
                ));
            }
            continue;
        }
        let mut parts = match o.remove("content") {
            Some(Value::Array(parts)) => parts,
            Some(Value::String(s)) if !s.is_empty() => vec![json!({"type": "text", "text": s})],
            _ => Vec::new(),
        };
        let mut images = Vec::new();
        for (k, name) in paths.iter().enumerate() {
            let (uri, time_s) = data_uri(store, owner, sid, name)?;
            if video {
                // A frame uploaded without its time (an image named as a frame): its place.
                let t = time_s.unwrap_or(k as f64);
                images.push(json!({"type": "text", "text": frame_label(t)}));
            }
            images.push(json!({"type": "image_url", "image_url": {"url": uri}}));
        }
        // The images before the words, the order vision models are trained on.
        images.append(&mut parts);
        o.insert("content".into(), Value::Array(images));
    }
    Ok(())
}

/// An image upload of the session as a `data:` URI, and its time in the video it came from.
fn data_uri(
    store: &Store,
    owner: &str,
    sid: &str,
    name: &str,
) -> Result<(String, Option<f64>), ApiError> {
    let (path, meta) = store.find(owner, sid, name).ok_or_else(|| {
        ApiError::invalid(format!(
            "imagePaths: no upload {name:?} in this session (upload it with POST /api/upload \
             and the same sessionId)"
        ))
    })?;
    if meta.kind != "image" {
        return Err(ApiError::invalid(format!(
            "imagePaths: {:?} is a {} upload, not an image (pass text and PDFs in \
             textFilePaths)",
            meta.file_name, meta.kind
        )));
    }
    let bytes = std::fs::read(&path)
        .map_err(|e| ApiError::internal(format!("reading upload {name}: {e}")))?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    Ok((
        format!("data:{};base64,{b64}", meta.media_type),
        meta.time_s,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::uploads::store::{new_name, Meta};

    fn meta(kind: &str, time_s: Option<f64>) -> Meta {
        Meta {
            file_name: "f".into(),
            kind: kind.into(),
            media_type: if kind == "image" {
                "image/png".into()
            } else {
                "text/plain".into()
            },
            size: 3,
            page_count: None,
            text_pages: None,
            truncated: false,
            time_s,
        }
    }

    #[test]
    fn names_become_parts_and_frames_get_their_times() {
        let dir = std::env::temp_dir().join(format!("weft-imgp-{}", std::process::id()));
        let s = Store { dir: dir.clone() };
        let (a, b, t) = (
            new_name("png").unwrap(),
            new_name("png").unwrap(),
            new_name("txt").unwrap(),
        );
        s.save("k", "s", &a, b"abc", None, &meta("image", Some(0.0)))
            .unwrap();
        s.save("k", "s", &b, b"abc", None, &meta("image", Some(2.5)))
            .unwrap();
        s.save("k", "s", &t, b"abc", None, &meta("text", None))
            .unwrap();
        let mut ms = vec![
            json!({"role": "user", "content": "first"}),
            json!({"role": "assistant", "content": "ok"}),
            json!({"role": "user", "content": "what is it?", "imagePaths": [a]}),
        ];
        attach(&s, "k", "s", &mut ms, None, false).unwrap();
        assert_eq!(
            ms[2],
            json!({"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,YWJj"}},
                {"type": "text", "text": "what is it?"}
            ]})
        );
        // Top-level names belong to the last user message; isVideo labels each frame.
        let mut ms = vec![json!({"role": "user", "content": "and now?"})];
        attach(&s, "k", "s", &mut ms, Some(json!([a, b])), true).unwrap();
        let parts = ms[0]["content"].as_array().unwrap();
        let kinds: Vec<&str> = parts.iter().map(|p| p["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["text", "image_url", "text", "image_url", "text"],
            "{parts:?}"
        );
        assert_eq!(parts[0]["text"], frame_label(0.0));
        assert_eq!(parts[2]["text"], frame_label(2.5));
        assert_eq!(parts[4]["text"], "and now?");
        // Unknown names (another session's, another owner's) and other kinds are refused.
        for (owner, sid, name, says) in [
            ("k", "other", &a, "no upload"),
            ("other", "s", &a, "no upload"),
            ("k", "s", &t, "not an image"),
        ] {
            let mut ms = vec![json!({"role": "user", "content": "x", "imagePaths": [name]})];
            let e = attach(&s, owner, sid, &mut ms, None, false).unwrap_err();
            assert_eq!(e.status, 400);
            assert!(e.public_message().contains(says), "{}", e.public_message());
        }
        let mut ms = vec![json!({"role": "user", "content": "x", "isVideo": true})];
        assert!(attach(&s, "k", "s", &mut ms, None, false).is_err());
        let _ = std::fs::remove_dir_all(dir);
    }
}
