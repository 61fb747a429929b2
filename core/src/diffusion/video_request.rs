//! What a video generation asks for, and how a request's loose numbers become the settings a
//! pipeline runs: recipe defaults per model, sizes snapped to the model's grid, limits.
//!
//! Kept apart from the pipeline so the server and the CLI resolve (and refuse) a request the
//! same way before any work is queued.

use super::files::ModelFileError;
use super::scheduler::SchedulerError;

/// What can go wrong preparing or running a video generation.
#[derive(Debug, thiserror::Error)]
pub enum VideoError {
    /// The request cannot be served as asked (a 400 in the server).
    #[error("{0}")]
    Request(String),
    /// A model file is missing, malformed, or a network refused its input.
    #[error(transparent)]
    Model(#[from] ModelFileError),
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// The progress callback asked to stop; the pipeline stopped between two steps.
    #[error("the generation was cancelled")]
    Cancelled,
}

/// The scheduler a generation steps with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampler {
    /// UniPC as the model folder configures it (Wan's default).
    UniPc,
    /// Flow-matching Euler with the same shift.
    Euler,
}

impl Sampler {
    /// `"unipc"` or `"euler"` (any case); anything else is a [`VideoError::Request`].
    pub fn parse(name: &str) -> Result<Sampler, VideoError> {
        match name.to_ascii_lowercase().as_str() {
            "unipc" => Ok(Sampler::UniPc),
            "euler" => Ok(Sampler::Euler),
            _ => Err(VideoError::Request(format!(
                "unknown sampler {name:?} (supported: unipc, euler)"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Sampler::UniPc => "unipc",
            Sampler::Euler => "euler",
        }
    }
}

/// A generation request; `None` fields take the model's recipe (or the server's defaults).
#[derive(Clone, Debug, Default)]
pub struct VideoRequest {
    pub prompt: String,
    /// `None`: the recipe's negative prompt. `Some("")` is an empty negative prompt.
    pub negative_prompt: Option<String>,
    pub width: Option<usize>,
    pub height: Option<usize>,
    pub frames: Option<usize>,
    pub steps: Option<usize>,
    /// Guidance scale of the (first, high-noise) expert.
    pub cfg: Option<f32>,
    /// Guidance scale of the second (low-noise) expert of a two-expert model.
    pub cfg2: Option<f32>,
    pub seed: u64,
    pub flow_shift: Option<f64>,
    pub sampler: Option<Sampler>,
    /// The first frame, for image-to-video models (resized to the output size).
    pub image: Option<image::RgbImage>,
    /// Initial latents `[16, t, h/8, w/8]` to start from instead of the seed's noise
    /// (reproducing another implementation's run from its exported noise).
    pub noise: Option<Vec<f32>>,
}

/// A model's defaults (Wan's official recipes) for what a request leaves out.
#[derive(Clone, Debug, PartialEq)]
pub struct Recipe {
    pub width: usize,
    pub height: usize,
    pub frames: usize,
    pub steps: usize,
    pub cfg: f32,
    pub cfg2: f32,
    pub fps: u32,
    pub negative_prompt: String,
}

/// Bounds on a request, so one request cannot ask for unbounded memory or time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// The largest width or height, in pixels.
    pub max_side: usize,
    pub max_frames: usize,
    pub max_steps: usize,
    /// The largest `width * height * frames`.
    pub max_voxels: usize,
}

impl Default for Limits {
    /// Wan's largest recipe (1280x720, 121 frames) with room, and no more.
    fn default() -> Self {
        Limits {
            max_side: 2048,
            max_frames: 257,
            max_steps: 200,
            max_voxels: 1280 * 720 * 161,
        }
    }
}

/// The settings a generation runs with, every default applied and every size snapped.
#[derive(Clone, Debug, PartialEq)]
pub struct VideoSettings {
    pub width: usize,
    pub height: usize,
    pub frames: usize,
    pub steps: usize,
    pub cfg: f32,
    pub cfg2: f32,
    pub seed: u64,
    pub negative_prompt: String,
    pub sampler: Sampler,
    /// `None`: the scheduler folder's shift.
    pub flow_shift: Option<f64>,
}

/// `frames` snapped to the nearest `1 + step * k` (halves go down; at least 1).
pub fn snap_frames(frames: usize, step: usize) -> usize {
    let k = (frames.saturating_sub(1) + (step - 1) / 2) / step;
    1 + step * k
}

/// `side` rounded up to a multiple of `grid` (at least one grid cell).
pub fn snap_side(side: usize, grid: usize) -> usize {
    side.div_ceil(grid).max(1) * grid
}

/// Applies `recipe` to `request` and checks the result against `limits`: zero or oversized
/// dimensions, frames or steps and non-finite guidance are [`VideoError::Request`]s.
/// `grid` is the pixel multiple sizes snap to, `frame_step` the temporal one.
pub fn resolve(
    request: &VideoRequest,
    recipe: &Recipe,
    limits: &Limits,
    grid: usize,
    frame_step: usize,
) -> Result<VideoSettings, VideoError> {
    let bad = |m: String| Err(VideoError::Request(m));
    let width = request.width.unwrap_or(recipe.width);
    let height = request.height.unwrap_or(recipe.height);
    if width == 0 || height == 0 {
        return bad(format!(
            "width and height must be positive (got {width}x{height})"
        ));
    }
    if width > limits.max_side || height > limits.max_side {
        return bad(format!(
            "{width}x{height} is too large: width and height are at most {}",
            limits.max_side
        ));
    }
    let frames = request.frames.unwrap_or(recipe.frames);
    if frames == 0 {
        return bad("frames must be at least 1".into());
    }
    if frames > limits.max_frames {
        return bad(format!(
            "{frames} frames is too many: at most {}",
            limits.max_frames
        ));
    }
    let (width, height) = (snap_side(width, grid), snap_side(height, grid));
    let frames = snap_frames(frames, frame_step);
    if width * height * frames > limits.max_voxels {
        return bad(format!(
            "{width}x{height} with {frames} frames is too large: width x height x frames \
             is at most {}",
            limits.max_voxels
        ));
    }
    let steps = request.steps.unwrap_or(recipe.steps);
    if steps == 0 || steps > limits.max_steps {
        return bad(format!(
            "steps must be between 1 and {} (got {steps})",
            limits.max_steps
        ));
    }
    let cfg = request.cfg.unwrap_or(recipe.cfg);
    let cfg2 = request.cfg2.unwrap_or(recipe.cfg2);
    for (name, v) in [("cfg", cfg), ("cfg2", cfg2)] {
        if !v.is_finite() || !(0.0..=100.0).contains(&v) {
            return bad(format!("{name} must be a number from 0 to 100 (got {v})"));
        }
    }
    if let Some(s) = request.flow_shift {
        if !s.is_finite() || s <= 0.0 || s > 100.0 {
            return bad(format!(
                "flowShift must be a positive number up to 100 (got {s})"
            ));
        }
    }
    Ok(VideoSettings {
        width,
        height,
        frames,
        steps,
        cfg,
        cfg2,
        seed: request.seed,
        negative_prompt: request
            .negative_prompt
            .clone()
            .unwrap_or_else(|| recipe.negative_prompt.clone()),
        sampler: request.sampler.unwrap_or(Sampler::UniPc),
        flow_shift: request.flow_shift,
    })
}

/// A phase of a generation, as progress reports name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    TextEncode,
    ImageEncode,
    Denoise,
    VaeDecode,
}

impl Phase {
    /// The name the streaming endpoint uses (`text-encode`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Phase::TextEncode => "text-encode",
            Phase::ImageEncode => "image-encode",
            Phase::Denoise => "denoise",
            Phase::VaeDecode => "vae-decode",
        }
    }
}

/// One progress report: `step` of `total` done in `phase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub phase: Phase,
    pub step: usize,
    pub total: usize,
}

/// What a progress callback answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Continue,
    /// End the generation with [`VideoError::Cancelled`] before the next piece of work.
    Stop,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe() -> Recipe {
        Recipe {
            width: 832,
            height: 480,
            frames: 33,
            steps: 30,
            cfg: 6.0,
            cfg2: 6.0,
            fps: 16,
            negative_prompt: "bad".into(),
        }
    }

    #[test]
    fn snapping() {
        assert_eq!(snap_frames(1, 4), 1);
        assert_eq!(snap_frames(2, 4), 1);
        assert_eq!(snap_frames(3, 4), 1);
        assert_eq!(snap_frames(4, 4), 5);
        assert_eq!(snap_frames(22, 4), 21);
        assert_eq!(snap_frames(81, 4), 81);
        assert_eq!(snap_side(1, 16), 16);
        assert_eq!(snap_side(48, 16), 48);
        assert_eq!(snap_side(50, 16), 64);
    }

    #[test]
    fn defaults_and_limits() {
        let limits = Limits::default();
        let s = resolve(&VideoRequest::default(), &recipe(), &limits, 16, 4).unwrap();
        assert_eq!((s.width, s.height, s.frames, s.steps), (832, 480, 33, 30));
        assert_eq!(s.negative_prompt, "bad");
        let r = VideoRequest {
            width: Some(100),
            frames: Some(6),
            negative_prompt: Some(String::new()),
            ..Default::default()
        };
        let s = resolve(&r, &recipe(), &limits, 16, 4).unwrap();
        assert_eq!((s.width, s.frames), (112, 5));
        assert_eq!(s.negative_prompt, "");
        for r in [
            VideoRequest {
                width: Some(0),
                ..Default::default()
            },
            VideoRequest {
                height: Some(4096),
                ..Default::default()
            },
            VideoRequest {
                frames: Some(0),
                ..Default::default()
            },
            VideoRequest {
                frames: Some(1000),
                ..Default::default()
            },
            VideoRequest {
                steps: Some(0),
                ..Default::default()
            },
            VideoRequest {
                cfg: Some(f32::NAN),
                ..Default::default()
            },
            VideoRequest {
                width: Some(2048),
                height: Some(2048),
                frames: Some(257),
                ..Default::default()
            },
        ] {
            let e = resolve(&r, &recipe(), &limits, 16, 4).unwrap_err();
            assert!(matches!(e, VideoError::Request(_)), "{e}");
        }
        assert!(Sampler::parse("dpm").is_err());
        assert_eq!(Sampler::parse("Euler").unwrap(), Sampler::Euler);
    }
}
