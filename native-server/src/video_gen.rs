//! What `weft video` and the server's video endpoints share: recognising and loading a video
//! model, decoding a first frame, and writing a generation as an MP4.
//!
//! A video model is a diffusers Wan pipeline folder or a Wan DiT GGUF (city96's layout, as the
//! reference serves them) with its companions beside it or named
//! (`--video-text-encoder`, `--video-vae`; docs/video-generation.md).

use std::path::Path;

use anyhow::{Context, Result};
use weft_core::diffusion::{Companions, Video, WanPipeline};
use weft_core::vision::{decode_image, DecodeLimits};
use weft_media::video::{encode_mp4, EncodeOptions, FrameRate};

/// Whether `path` is a video model this build serves: a diffusers folder whose
/// model_index.json names a Wan pipeline, or a GGUF file whose `general.architecture` is
/// `wan` (a text model's GGUF is not one).
pub fn is_video_model(path: &Path) -> bool {
    if path.is_file() {
        return is_wan_gguf(path);
    }
    let Ok(text) = std::fs::read_to_string(path.join("model_index.json")) else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["_class_name"].as_str().map(|c| c.starts_with("Wan")))
        .unwrap_or(false)
}

/// Whether `path` is a Wan DiT GGUF: `general.architecture` is `wan`, or (stable-diffusion.cpp
/// writes none) absent with the file reading as a Wan DiT.
fn is_wan_gguf(path: &Path) -> bool {
    let Ok(file) = weft_core::gguf::ModelFile::open(path) else {
        return false;
    };
    match file.gguf.architecture() {
        Some(arch) => arch == weft_core::diffusion::wan_names::ARCH,
        None => weft_core::diffusion::open_dit(path).is_ok(),
    }
}

/// Loads the video model at `path` — a diffusers Wan folder, or a Wan DiT GGUF (either file
/// of an expert pair) — with its text encoder, tokenizer and VAE from `companions` or beside
/// it.
pub fn load_video_model(path: &Path, companions: &Companions) -> Result<WanPipeline> {
    let loaded = if path.is_file() {
        WanPipeline::load_gguf(path, companions)
    } else {
        WanPipeline::load(path, companions)
    };
    loaded.with_context(|| format!("{}", path.display()))
}

/// An uploaded or inline image (PNG, JPEG, WebP, GIF) as RGB, bounded like vision inputs.
pub fn decode_first_frame(bytes: &[u8]) -> Result<image::RgbImage, String> {
    let img = decode_image(bytes, &DecodeLimits::default()).map_err(|e| e.to_string())?;
    image::RgbImage::from_raw(img.width, img.height, img.data)
        .ok_or_else(|| "the decoded image has the wrong number of bytes".to_string())
}

/// The frames of `video` as an H.264 MP4 at `fps`.
pub fn to_mp4(video: &Video, fps: u32) -> Result<Vec<u8>, weft_media::Error> {
    let frame_bytes = video.width * video.height * 3;
    let frames: Vec<image::RgbImage> = video
        .rgb
        .chunks_exact(frame_bytes)
        .map(|f| {
            image::RgbImage::from_raw(video.width as u32, video.height as u32, f.to_vec())
                .expect("a frame has width * height * 3 bytes")
        })
        .collect();
    encode_mp4(&frames, &EncodeOptions::new(FrameRate::per_second(fps)))
}

/// A seed for requests that name none (reported back so the run can be repeated).
pub fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        return t & 0xFFFF_FFFF;
    }
    // Within 2^32 so it survives clients that read JSON numbers as doubles.
    u64::from_le_bytes(b) & 0xFFFF_FFFF
}
