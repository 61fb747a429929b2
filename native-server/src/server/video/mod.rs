//! Video generation over HTTP (the reference document's three routes):
//! `POST /api/video-generate`, `POST /api/video-generate/stream` (SSE `videoGen` ticks, then a
//! `done` frame or `{"done": true, "error"}`) and the OpenAI-shaped
//! `POST /v1/videos/generations` (`size`, `negative_prompt`, `response_format`).
//!
//! Each generation is a job (kind `video`) on the served model's own one-thread runner, so
//! generations queue and run one at a time; they show in `/api/v1/jobs` and
//! `POST /api/v1/jobs/{id}/cancel` stops one between two denoising steps (the runner shares
//! the model jobs' store when the server has one). The MP4 is stored among the requesting
//! principal's uploads (`url` is its `/uploads/<name>`), so only that principal can fetch it.
//!
//! Files: `types.rs` (wire shapes), `request.rs` (checks, the 400s), `run.rs` (the job),
//! `generate.rs` (the handlers).

mod generate;
mod request;
mod run;
pub mod types;

use std::sync::Arc;

use axum::extract::FromRef;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use weft_core::diffusion::{VideoMode, WanPipeline};

use crate::jobs::{JobRunner, MemoryJobs};
use crate::server::auth::RouterState;
use crate::server::uploads::Uploads;
use types::VideoInfo;

/// The message of every video route when the served model makes no video.
pub const NOT_A_VIDEO_MODEL: &str = "The loaded model is not a video-generation model.";

/// A served video model and the runner its generations queue on.
pub struct VideoService {
    pub pipeline: Arc<WanPipeline>,
    /// The model's name (its folder's name), shown in jobs.
    pub name: String,
    /// Frames per second when a request names none (`--fps`, else the recipe's).
    pub fps: u32,
    runner: Arc<JobRunner>,
}

impl VideoService {
    /// `runner`: a one-thread runner on the model jobs' store, when the server has one (so
    /// the jobs routes list and cancel generations); else a private one.
    pub fn new(
        pipeline: WanPipeline,
        name: String,
        fps: u32,
        runner: Option<Arc<JobRunner>>,
    ) -> Self {
        let runner = runner.unwrap_or_else(|| JobRunner::new(Arc::new(MemoryJobs::new(64)), 1));
        VideoService {
            pipeline: Arc::new(pipeline),
            name,
            fps,
            runner,
        }
    }

    /// The `video` block of `/api/models`.
    pub fn info(&self) -> VideoInfo {
        VideoInfo {
            family: "wan".into(),
            supports_audio: false,
            supports_image_conditioning: self.pipeline.mode() == VideoMode::ImageToVideo,
            supports_end_image_conditioning: false,
            supports_reference_conditioning: false,
            max_reference_images: 0,
        }
    }
}

/// What the video routes read.
#[derive(Clone)]
pub struct VideoState {
    pub video: Option<Arc<VideoService>>,
    pub uploads: Arc<Uploads>,
    /// `sessionId` must be one of the caller's sessions (as on the upload route).
    pub sessions: Arc<crate::server::conversations::Sessions>,
}

/// `/video-generate` and `/video-generate/stream`, relative to `/api` (user keys).
pub fn api_routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    VideoState: FromRef<S>,
{
    crate::server::auth::Routes::user(
        OpenApiRouter::new()
            .routes(routes!(generate::video_generate))
            .routes(routes!(generate::video_generate_stream)),
    )
}

/// `/videos/generations`, relative to `/v1` (user keys).
pub fn openai_routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    VideoState: FromRef<S>,
{
    crate::server::auth::Routes::user(
        OpenApiRouter::new().routes(routes!(generate::videos_generations)),
    )
}
