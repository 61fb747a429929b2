//! A video body to a pipeline request, or the 400 that says why not: the size, the sampler,
//! the mode, the first frame (inline base64 or an upload of the caller's), the fps; then the
//! model's own checks ([`WanPipeline::settings`]: frames, steps, limits, an image on a
//! text-to-video model).

use base64::Engine;
use weft_core::diffusion::{Sampler, VideoError, VideoMode, VideoRequest, VideoSettings};

use super::types::VideoBody;
use super::VideoService;
use crate::server::error::ApiError;
use crate::server::uploads::store::{valid_name, Store};
use crate::video_gen::{decode_first_frame, random_seed};

/// A checked request, ready to queue.
pub struct Prepared {
    pub request: VideoRequest,
    pub settings: VideoSettings,
    pub fps: u32,
    /// The uploads session the output goes into (and `imagePath` was looked up in).
    pub session: String,
}

/// The most bytes of an inline first frame (base64 decoded).
const MAX_IMAGE_BYTES: usize = 16 << 20;

/// `"WxH"` to `(W, H)`.
pub fn parse_size(size: &str) -> Result<(usize, usize), ApiError> {
    let bad = || {
        ApiError::invalid(format!(
            "size {size:?} is not WIDTHxHEIGHT (e.g. \"832x480\")"
        ))
    };
    let (w, h) = size.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let w: usize = w.trim().parse().map_err(|_| bad())?;
    let h: usize = h.trim().parse().map_err(|_| bad())?;
    Ok((w, h))
}

fn video_error(e: VideoError) -> ApiError {
    match e {
        VideoError::Request(m) => ApiError::invalid(m),
        other => ApiError::internal(other.to_string()),
    }
}

/// The first frame the body names, if any.
fn first_frame(
    body: &VideoBody,
    store: &Store,
    owner: &str,
    session: &str,
) -> Result<Option<image::RgbImage>, ApiError> {
    let bytes = match (&body.image, &body.image_path) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "give the first frame as image or imagePath, not both",
            ))
        }
        (Some(inline), None) => {
            let data = match inline.split_once(";base64,") {
                Some((head, rest)) if head.starts_with("data:") => rest,
                _ => inline.as_str(),
            };
            if data.len() / 4 * 3 > MAX_IMAGE_BYTES {
                return Err(ApiError::too_large(format!(
                    "the image is larger than {} MiB",
                    MAX_IMAGE_BYTES >> 20
                )));
            }
            base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|e| ApiError::invalid(format!("image is not valid base64: {e}")))?
        }
        (None, Some(name)) => {
            // Only a stored name of the caller's own uploads; any path (absolute, `..`, another
            // folder) is outside the uploads area.
            let not_found = || {
                ApiError::invalid(format!(
                    "imagePath {name:?} is not an image among your uploads (give the name \
                     POST /api/upload returned; paths outside the uploads area are refused)"
                ))
            };
            if !valid_name(name) {
                return Err(not_found());
            }
            let (path, meta) = store.find(owner, session, name).ok_or_else(not_found)?;
            if meta.kind != "image" {
                return Err(not_found());
            }
            std::fs::read(path).map_err(|_| not_found())?
        }
        (None, None) => return Ok(None),
    };
    decode_first_frame(&bytes)
        .map(Some)
        .map_err(|e| ApiError::invalid(format!("the image could not be decoded: {e}")))
}

/// Checks `body` (`size`: the OpenAI route's `"WxH"`) against the served model.
pub fn prepare(
    svc: &VideoService,
    store: &Store,
    owner: &str,
    body: VideoBody,
    size: Option<&str>,
) -> Result<Prepared, ApiError> {
    if body.prompt.trim().is_empty() {
        return Err(ApiError::invalid("prompt is required"));
    }
    let (mut width, mut height) = (body.width, body.height);
    if let Some(s) = size {
        let (w, h) = parse_size(s)?;
        (width, height) = (Some(w), Some(h));
    }
    let sampler = body.sampler.as_deref().map(Sampler::parse).transpose();
    let sampler = sampler.map_err(video_error)?;
    let fps = body.fps.unwrap_or(svc.fps);
    if !(1..=120).contains(&fps) {
        return Err(ApiError::invalid(format!(
            "fps must be between 1 and 120 (got {fps})"
        )));
    }
    let session = body
        .session_id
        .clone()
        .filter(|s| !s.is_empty() && s.len() <= 256)
        .unwrap_or_else(|| crate::server::conversations::default_session(owner));
    let image = first_frame(&body, store, owner, &session)?;
    match body.video_mode.as_deref() {
        None | Some("") => {}
        Some("t2v") if image.is_some() => {
            return Err(ApiError::invalid(
                "videoMode t2v takes no image; use i2v for a first frame",
            ))
        }
        Some("t2v") | Some("i2v") => {}
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "videoMode {other:?} is not supported by this model (t2v, i2v)"
            )))
        }
    }
    let pipeline = &svc.pipeline;
    if body.video_mode.as_deref() == Some("i2v") && pipeline.mode() == VideoMode::TextToVideo {
        return Err(ApiError::invalid(
            "this model is text-to-video only: load a Wan image-to-video model for i2v",
        ));
    }
    // With a first frame and no size, the output keeps the image's aspect ratio at about the
    // default's area.
    if let (Some(img), None, None) = (&image, width, height) {
        let area = (pipeline.recipe.width * pipeline.recipe.height) as f64;
        let aspect = img.width() as f64 / img.height().max(1) as f64;
        let w = (area * aspect).sqrt();
        (width, height) = (Some(w.round() as usize), Some((area / w).round() as usize));
    }
    let request = VideoRequest {
        prompt: body.prompt,
        negative_prompt: body.negative_prompt,
        width,
        height,
        frames: body.frames,
        steps: body.steps,
        cfg: body.cfg,
        cfg2: body.cfg2,
        seed: body.seed.unwrap_or_else(random_seed),
        flow_shift: body.flow_shift,
        sampler,
        image,
        noise: None,
    };
    let settings = pipeline.settings(&request).map_err(video_error)?;
    Ok(Prepared {
        request,
        settings,
        fps,
        session,
    })
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("832x480").unwrap(), (832, 480));
        assert_eq!(parse_size(" 64X48 ").unwrap(), (64, 48));
        for bad in ["", "832", "x480", "832x", "axb", "-1x5", "832*480"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
