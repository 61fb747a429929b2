//! Video uploads into frames: an MP4/MOV with H.264 is sampled (1 frame a second, at most 16,
//! the `video_url` defaults) with `weft-media`, and each frame stored as a PNG image upload of
//! the same session, its time in the video in its metadata. The chat UI then sends the frames'
//! names as `imagePaths` with `isVideo: true` (`ui/image_paths.rs`), and each frame reaches the
//! model after its time label, as a `video_url` part's frames do.
//!
//! Another container or codec is a 415 naming it; a corrupt file a 422 (the upload route's
//! status for a file of the right type that cannot be read). Decoding runs on a blocking
//! thread, and the upload gives up on it after [`DECODE_SECS`](crate::server::common::video::DECODE_SECS).

use std::time::Duration;

use axum::body::Bytes;
use weft_media::video::{sample_frames, SampleOptions, VideoLimits};

use super::sniff::{unreadable, unsupported};
use crate::server::common::video::DECODE_SECS;
use crate::server::error::ApiError;

/// One frame of an uploaded video: its time in seconds and the frame as PNG bytes.
pub struct UploadFrame {
    pub time_s: f64,
    pub png: Vec<u8>,
}

/// The frames of the video `bytes` (`name`: the client's file name, for messages).
pub async fn frames(name: &str, bytes: Bytes) -> Result<Vec<UploadFrame>, ApiError> {
    let name = name.to_string();
    let job = move || -> Result<Vec<UploadFrame>, ApiError> {
        let limits = VideoLimits {
            max_bytes: bytes.len() as u64,
            ..VideoLimits::default()
        };
        let frames = sample_frames(&bytes, &SampleOptions::default(), &limits).map_err(|e| {
            if e.is_unsupported() {
                unsupported(format!("{name:?}: {e}"))
            } else {
                unreadable(format!("{name:?} cannot be read as a video: {e}"))
            }
        })?;
        if frames.is_empty() {
            return Err(unreadable(format!("{name:?} has no video frames")));
        }
        frames
            .into_iter()
            .map(|f| {
                let mut png = Vec::new();
                f.image
                    .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
                    .map_err(|e| ApiError::internal(format!("storing a frame as PNG: {e}")))?;
                Ok(UploadFrame {
                    time_s: f.time_s,
                    png,
                })
            })
            .collect()
    };
    let decoding = tokio::task::spawn_blocking(job);
    match tokio::time::timeout(Duration::from_secs(DECODE_SECS), decoding).await {
        Ok(done) => done.map_err(|e| ApiError::internal(format!("video decoding stopped: {e}")))?,
        Err(_) => Err(unreadable(format!(
            "the video took longer than {DECODE_SECS} s to decode; upload a shorter or \
             smaller one"
        ))),
    }
}
