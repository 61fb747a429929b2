//! Video uploads into frames: `sample_frames(bytes, options, limits)`; and frames into a video:
//! `encode_mp4(frames, options)` (`encode.rs`: H.264 by OpenH264's encoder, `yuv.rs`: the colour
//! conversion, `mux.rs`: the MP4 file).
//!
//! Reads MP4/MOV (ISO-BMFF) with H.264 video. The container is demuxed with `mp4parse`
//! (`demux.rs`), H.264 is decoded with OpenH264 built from the `openh264` crate's sources
//! (`h264.rs`). Anything else is an [`Error::UnsupportedCodec`] / [`Error::UnsupportedContainer`]
//! naming what was found (`container.rs`, `fourcc.rs`).
//!
//! Which frames (`sampling.rs`): times are measured from the first displayed frame. With a video
//! of duration `D` seconds, `fps` asks for frames at `0, 1/fps, 2/fps, ...` below `D`; when that is
//! more than `max_frames`, the `max_frames` times are spread evenly instead: `k * D / max_frames`
//! for `k = 0..max_frames`. Each time takes the frame on screen then (the last frame whose
//! presentation time is at or before it); a source frame picked twice is returned once. Frames
//! come back in presentation order, each with its own presentation time.
//!
//! Bounds, checked before decoding: file size, sample count, frame size (from the container and
//! the avcC's SPS), and the pixels the decoder must produce to reach the chosen frames (frames
//! decoded from the key frames before them, times the coded size). An in-band SPS is checked
//! before the decoder sees it and may not grow the frame size. Memory is then at most
//! `max_frames` RGB frames plus one decoder.

mod container;
mod demux;
mod encode;
mod fourcc;
mod h264;
mod mux;
mod sampling;
mod yuv;

use std::path::Path;

use image::RgbImage;

use crate::Error;

pub use encode::{
    encode_mp4, encode_mp4_with, EncodeOptions, FrameRate, MAX_FRAMES, MAX_LONG_SIDE,
    MAX_SHORT_SIDE, MIN_SIDE,
};
pub use sampling::pick_times;

/// One sampled frame.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Presentation time in seconds from the first displayed frame.
    pub time_s: f64,
    /// The frame's position in presentation order (0 = first displayed frame).
    pub index: usize,
    pub image: RgbImage,
}

/// How many frames to take: `fps` in (0, 60], `max_frames` in 1..=64 (defaults 1 and 16, as the
/// OpenAI-style `video_url` part documents them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleOptions {
    pub fps: f64,
    pub max_frames: usize,
}

impl SampleOptions {
    pub const DEFAULT_FPS: f64 = 1.0;
    pub const DEFAULT_MAX_FRAMES: usize = 16;
    pub const MAX_FPS: f64 = 60.0;
    pub const MAX_FRAMES: usize = 64;

    /// Checked options; `None` takes the default.
    pub fn new(fps: Option<f64>, max_frames: Option<usize>) -> Result<Self, Error> {
        let options = SampleOptions {
            fps: fps.unwrap_or(Self::DEFAULT_FPS),
            max_frames: max_frames.unwrap_or(Self::DEFAULT_MAX_FRAMES),
        };
        options.validate()?;
        Ok(options)
    }

    pub fn validate(&self) -> Result<(), Error> {
        // `!(x > 0)` also refuses NaN.
        if !(self.fps > 0.0 && self.fps <= Self::MAX_FPS) {
            return Err(Error::InvalidOption(format!(
                "fps must be in (0, {}], got {}",
                Self::MAX_FPS,
                self.fps
            )));
        }
        if !(1..=Self::MAX_FRAMES).contains(&self.max_frames) {
            return Err(Error::InvalidOption(format!(
                "max_frames must be in 1..={}, got {}",
                Self::MAX_FRAMES,
                self.max_frames
            )));
        }
        Ok(())
    }
}

impl Default for SampleOptions {
    fn default() -> Self {
        SampleOptions {
            fps: Self::DEFAULT_FPS,
            max_frames: Self::DEFAULT_MAX_FRAMES,
        }
    }
}

/// Limits on one video, checked before decoding.
#[derive(Clone, Debug)]
pub struct VideoLimits {
    /// Largest file read (bytes).
    pub max_bytes: u64,
    /// Largest frame width and height (pixels), coded size as the SPS declares it.
    pub max_width: u32,
    pub max_height: u32,
    /// Most samples (frames) the video track may have.
    pub max_samples: usize,
    /// Most pixels the decoder may produce to reach the chosen frames (frames decoded times
    /// the coded frame size): bounds decoding time, which grows with both.
    pub max_decoded_pixels: u64,
}

impl Default for VideoLimits {
    fn default() -> Self {
        VideoLimits {
            max_bytes: 512 << 20,
            // 4K UHD; a vision model sees far fewer pixels anyway.
            max_width: 3840,
            max_height: 2160,
            // An hour at 60 fps.
            max_samples: 216_000,
            // 2000 frames of 1080p: 16 frames of a video with a key frame every 2 s at 60 fps
            // need under 2000 decoded.
            max_decoded_pixels: 2000 * 1920 * 1088,
        }
    }
}

/// What a video holds, from its headers alone (no decoding).
#[derive(Clone, Debug, PartialEq)]
pub struct VideoInfo {
    /// Frame size the container declares.
    pub width: u32,
    pub height: u32,
    pub duration_s: f64,
    /// Frames in the video track.
    pub frame_count: usize,
    /// Frames [`sample_frames`] returns with the same options: lets a caller refuse a request
    /// whose frames cannot fit the context before any decoding.
    pub sampled: usize,
}

/// The headers of an MP4/H.264 video: the same checks and errors as [`sample_frames`] up to
/// decoding.
pub fn probe(
    bytes: &[u8],
    options: &SampleOptions,
    limits: &VideoLimits,
) -> Result<VideoInfo, Error> {
    options.validate()?;
    if bytes.len() as u64 > limits.max_bytes {
        return Err(Error::TooLarge(format!(
            "video is {} bytes, over the limit of {}",
            bytes.len(),
            limits.max_bytes
        )));
    }
    container::require_iso_bmff(bytes)?;
    let track = demux::video_track(bytes, limits)?;
    h264::check_avcc(&track.avcc, limits)?;
    let chosen = sampling::choose(
        &track.presentation,
        track.timescale,
        track.duration,
        options,
    );
    Ok(VideoInfo {
        width: track.width,
        height: track.height,
        duration_s: track.duration as f64 / track.timescale as f64,
        frame_count: track.samples.len(),
        sampled: chosen.len(),
    })
}

/// Frames of a video held in memory, chosen by `options`.
pub fn sample_frames(
    bytes: &[u8],
    options: &SampleOptions,
    limits: &VideoLimits,
) -> Result<Vec<Frame>, Error> {
    options.validate()?;
    if bytes.len() as u64 > limits.max_bytes {
        return Err(Error::TooLarge(format!(
            "video is {} bytes, over the limit of {}",
            bytes.len(),
            limits.max_bytes
        )));
    }
    container::require_iso_bmff(bytes)?;
    let track = demux::video_track(bytes, limits)?;
    let chosen = sampling::choose(
        &track.presentation,
        track.timescale,
        track.duration,
        options,
    );
    h264::decode_chosen(bytes, &track, &chosen, limits)
}

/// Frames of a video file (read whole, after its size is checked against `limits.max_bytes`).
pub fn sample_frames_from_file(
    path: &Path,
    options: &SampleOptions,
    limits: &VideoLimits,
) -> Result<Vec<Frame>, Error> {
    options.validate()?;
    let size = std::fs::metadata(path)?.len();
    if size > limits.max_bytes {
        return Err(Error::TooLarge(format!(
            "video is {size} bytes, over the limit of {}",
            limits.max_bytes
        )));
    }
    let bytes = std::fs::read(path)?;
    sample_frames(&bytes, options, limits)
}
