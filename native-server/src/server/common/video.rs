//! Video input of the chat surfaces: OpenAI `video_url` content parts on
//! `/v1/chat/completions` (and the chat UI's video uploads, whose frames are stored images). A
//! video is a run of sampled frames in source order, each a short text label with its time
//! ([`frame_label`]) followed by the frame as an image, the layout the reference server gives
//! models without a temporal encoder.
//!
//! `{"type": "video_url", "video_url": {"url": "data:video/mp4;base64,...", "fps": 1,
//! "max_frames": 16}}`: only `data:` URIs (remote URLs are not fetched, as for images), `fps` in
//! (0, 60] (default 1), `max_frames` in 1..=64 (default 16); MP4/MOV with H.264, decoded by
//! `weft-media` (no system ffmpeg). Another codec or container is a 415 naming it, a corrupt
//! file a 400.
//!
//! Bounds: a video counts as one of `--max-images`, its encoded bytes count in
//! `--max-image-bytes` with the request's images; its frames are bounded by `max_frames`, by
//! `--max-image-pixels` each (from the headers), and by the context: the frames' image
//! positions are counted from the headers before any pixel is decoded. Decoding runs on a
//! blocking thread and a request gives up on it after [`DECODE_SECS`] (the decoder's own
//! work is bounded by `weft-media`'s decoded-pixel limit, so the thread ends soon after).

use std::collections::VecDeque;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use weft_core::chat::{Content, Message};
use weft_core::vision::RgbImage;
use weft_media::video::{probe, sample_frames, SampleOptions, VideoLimits};

use super::images::{vision_of, ImageLimits};
use crate::server::error::ApiError;
use crate::server::leased::Leased;
use crate::server::uploads::sniff::unsupported;

/// How long a request waits for its videos to be decoded.
pub const DECODE_SECS: u64 = 60;

/// The text before a video frame: its time in the video in seconds (at most two decimals, so
/// frames up to 60 fps keep distinct labels, e.g. `Frame at 2.0 s:`, `Frame at 0.25 s:`).
pub fn frame_label(time_s: f64) -> String {
    let t = format!("{time_s:.2}");
    let t = t.strip_suffix('0').unwrap_or(&t);
    format!("Frame at {t} s:")
}

/// One decoded frame: its time in seconds and its pixels.
pub type Frame = (f64, RgbImage);

/// A `video_url` part, checked: its bytes and sampling options.
struct VideoPart {
    bytes: Vec<u8>,
    options: SampleOptions,
}

/// The 400 / 415 of a video `weft-media` refused.
fn media_error(i: usize, e: weft_media::Error) -> ApiError {
    if e.is_unsupported() {
        unsupported(format!("video {i}: {e}"))
    } else {
        ApiError::invalid(format!("video {i}: {e}"))
    }
}

/// A `video_url` part's `url`, `fps` and `max_frames` (the options inside `video_url`, or
/// beside it in the part).
fn parse_part(
    i: usize,
    part: &serde_json::Map<String, Value>,
) -> Result<(String, SampleOptions), ApiError> {
    let v = part.get("video_url");
    let url = match v {
        Some(Value::String(s)) => s.as_str(),
        Some(o) => o.get("url").and_then(Value::as_str).unwrap_or(""),
        None => "",
    };
    if url.is_empty() {
        return Err(ApiError::invalid("a video_url part has no url"));
    }
    let field = |k: &str| v.and_then(|o| o.get(k)).or_else(|| part.get(k));
    let fps = match field("fps") {
        None | Some(Value::Null) => None,
        Some(x) => Some(x.as_f64().ok_or_else(|| {
            ApiError::invalid(format!("video {i}: fps must be a number, got {x}"))
        })?),
    };
    let max_frames = match field("max_frames") {
        None | Some(Value::Null) => None,
        Some(x) => Some(
            x.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    ApiError::invalid(format!(
                        "video {i}: max_frames must be an integer in 1..={}, got {x}",
                        SampleOptions::MAX_FRAMES
                    ))
                })?,
        ),
    };
    let options = SampleOptions::new(fps, max_frames).map_err(|e| media_error(i, e))?;
    Ok((url.to_string(), options))
}

/// The bytes of a video `data:` URI (remote URLs are refused).
fn data_of(i: usize, url: &str) -> Result<&str, ApiError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        return Err(ApiError::invalid(
            "remote video URLs are not fetched: send the video as a data URI \
             (data:video/mp4;base64,...)",
        ));
    }
    let body = url
        .strip_prefix("data:")
        .and_then(|u| u.split_once(','))
        .filter(|(kind, _)| kind.ends_with(";base64"))
        .map(|(_, body)| body);
    body.ok_or_else(|| {
        ApiError::invalid(format!(
            "video {i}: video_url.url must be a base64 data URI (data:video/mp4;base64,...)"
        ))
    })
}

/// The `video_url` parts of `messages`, in the order [`Images`](super::images::Images) meets
/// them, decoded into frames: nothing when there are none. `messages` is not changed; the
/// frames are put in place of the parts by `Images::take_openai`.
pub async fn decode_parts(
    limits: &ImageLimits,
    m: &Leased,
    n_ctx: usize,
    messages: &[Message],
) -> Result<VecDeque<Vec<Frame>>, ApiError> {
    let parts: Vec<&serde_json::Map<String, Value>> = messages
        .iter()
        .filter_map(|m| match &m.content {
            Some(Content::Parts(parts)) => Some(parts),
            _ => None,
        })
        .flatten()
        .filter(|p| p.kind == "video_url")
        .map(|p| &p.extra)
        .collect();
    if parts.is_empty() {
        return Ok(VecDeque::new());
    }
    let vision = vision_of(m)?;
    if parts.len() > limits.max_images {
        return Err(ApiError::invalid(format!(
            "too many videos: at most {} per request (--max-images)",
            limits.max_images
        )));
    }
    let mut videos = Vec::new();
    let mut total = 0usize;
    for (i, p) in parts.into_iter().enumerate() {
        let (url, options) = parse_part(i, p)?;
        let data = data_of(i, &url)?;
        // Checked on the encoded length, before decoding allocates anything.
        total += data.len() / 4 * 3;
        if total > limits.max_bytes {
            return Err(ApiError::invalid(format!(
                "the request's videos are larger than {} bytes together",
                limits.max_bytes
            )));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| ApiError::invalid(format!("video {i} is not valid base64: {e}")))?;
        videos.push(VideoPart { bytes, options });
    }
    let max_pixels = limits.max_pixels;
    let job = move || -> Result<VecDeque<Vec<Frame>>, ApiError> {
        let vl = VideoLimits::default();
        // Every video's frames, from the headers, before any is decoded.
        let mut positions = 0usize;
        for (i, v) in videos.iter().enumerate() {
            let info = probe(&v.bytes, &v.options, &vl).map_err(|e| media_error(i, e))?;
            if u64::from(info.width) * u64::from(info.height) > max_pixels {
                return Err(ApiError::invalid(format!(
                    "video {i}: its {}x{} frames are over the limit of {max_pixels} pixels",
                    info.width, info.height
                )));
            }
            positions += info.sampled * vision.n_tokens(info.width, info.height);
        }
        if positions >= n_ctx {
            return Err(ApiError::invalid_code(
                "context_length_exceeded",
                format!(
                    "the video frames take {positions} positions but the context holds {n_ctx} \
                     (ask for fewer with max_frames or a lower fps)"
                ),
            ));
        }
        let mut out = VecDeque::new();
        for (i, v) in videos.iter().enumerate() {
            let frames = sample_frames(&v.bytes, &v.options, &vl).map_err(|e| media_error(i, e))?;
            out.push_back(
                frames
                    .into_iter()
                    .map(|f| {
                        let (width, height) = f.image.dimensions();
                        let data = f.image.into_raw();
                        (
                            f.time_s,
                            RgbImage {
                                width,
                                height,
                                data,
                            },
                        )
                    })
                    .collect(),
            );
        }
        Ok(out)
    };
    let decoding = tokio::task::spawn_blocking(job);
    match tokio::time::timeout(Duration::from_secs(DECODE_SECS), decoding).await {
        Ok(done) => done.map_err(|e| ApiError::internal(format!("video decoding stopped: {e}")))?,
        Err(_) => Err(ApiError::invalid(format!(
            "the video took longer than {DECODE_SECS} s to decode; send a shorter or smaller one"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels() {
        assert_eq!(frame_label(0.0), "Frame at 0.0 s:");
        assert_eq!(frame_label(2.0), "Frame at 2.0 s:");
        assert_eq!(frame_label(0.25), "Frame at 0.25 s:");
        assert_eq!(frame_label(1.0 / 3.0), "Frame at 0.33 s:");
    }

    fn part(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn options_and_urls() {
        let (url, o) = parse_part(
            0,
            &part(json!({"video_url": {"url": "data:video/mp4;base64,AAAA"}})),
        )
        .unwrap();
        assert_eq!(
            (url.as_str(), o),
            ("data:video/mp4;base64,AAAA", SampleOptions::default())
        );
        let (_, o) = parse_part(
            0,
            &part(json!({"video_url": {"url": "data:,", "fps": 2.5, "max_frames": 3}})),
        )
        .unwrap();
        assert_eq!((o.fps, o.max_frames), (2.5, 3));
        for (bad, says) in [
            (
                json!({"video_url": {"url": "data:,", "fps": 0}}),
                "fps must be in",
            ),
            (
                json!({"video_url": {"url": "data:,", "fps": 61}}),
                "fps must be in",
            ),
            (
                json!({"video_url": {"url": "data:,", "fps": "1"}}),
                "fps must be a number",
            ),
            (
                json!({"video_url": {"url": "data:,", "max_frames": 65}}),
                "max_frames",
            ),
            (
                json!({"video_url": {"url": "data:,", "max_frames": 0}}),
                "max_frames",
            ),
            (
                json!({"video_url": {"url": "data:,", "max_frames": -1}}),
                "max_frames",
            ),
            (json!({"video_url": {}}), "no url"),
        ] {
            let e = parse_part(0, &part(bad.clone())).unwrap_err();
            assert_eq!(e.status, 400, "{bad}");
            assert!(
                e.public_message().contains(says),
                "{bad}: {}",
                e.public_message()
            );
        }
        assert!(data_of(0, "https://example.invalid/a.mp4")
            .unwrap_err()
            .public_message()
            .contains("not fetched"));
        assert!(data_of(0, "data:video/mp4,raw").is_err());
        assert_eq!(data_of(0, "data:video/mp4;base64,AAAA").unwrap(), "AAAA");
    }
}
