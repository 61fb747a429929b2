//! The wire shapes of the video routes (the reference document's), camelCase on `/api`,
//! `size` / `negative_prompt` / `response_format` on the OpenAI-shaped route.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of `POST /api/video-generate` and `/api/video-generate/stream`; the OpenAI route
/// takes the same fields plus its own ([`OpenAiVideoBody`]).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VideoBody {
    #[serde(default)]
    pub prompt: String,
    pub negative_prompt: Option<String>,
    pub width: Option<usize>,
    pub height: Option<usize>,
    pub frames: Option<usize>,
    pub steps: Option<usize>,
    pub cfg: Option<f32>,
    pub cfg2: Option<f32>,
    pub seed: Option<u64>,
    pub fps: Option<u32>,
    pub flow_shift: Option<f64>,
    /// `unipc` (default) or `euler`.
    pub sampler: Option<String>,
    /// A file a previous `POST /api/upload` returned (its stored name).
    pub image_path: Option<String>,
    /// The first frame inline: base64, a `data:image/...;base64,` prefix accepted.
    pub image: Option<String>,
    /// `t2v` or `i2v` (omitted: inferred from whether an image is given).
    #[serde(alias = "video_mode")]
    pub video_mode: Option<String>,
    /// The chat-UI session whose uploads `imagePath` names (default: the caller's default
    /// session).
    pub session_id: Option<String>,
}

/// `POST /v1/videos/generations`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct OpenAiVideoBody {
    #[serde(flatten)]
    pub common: VideoBody,
    /// `"WxH"`.
    pub size: Option<String>,
    pub negative_prompt: Option<String>,
    /// `url` (default) or `b64_json`.
    pub response_format: Option<String>,
}

/// The reply of `POST /api/video-generate` and the last frame of the stream (with `done`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VideoReply {
    pub ok: bool,
    pub url: String,
    /// Always null: Wan makes no audio.
    pub audio_url: Option<String>,
    pub width: usize,
    pub height: usize,
    pub frames: usize,
    pub fps: u32,
    pub seed: u64,
    pub codec: String,
    pub elapsed_seconds: f64,
}

/// One `data` item of the OpenAI-shaped reply.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiVideoData {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b64_json: Option<String>,
}

/// The reply of `POST /v1/videos/generations`.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiVideoReply {
    pub created: u64,
    pub data: Vec<OpenAiVideoData>,
    pub audio_url: Option<String>,
    pub width: usize,
    pub height: usize,
    pub frames: usize,
    pub fps: u32,
    pub seed: u64,
    pub codec: String,
    pub elapsed_seconds: f64,
}

/// What `/api/models` says of a served video model (null for text models).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VideoInfo {
    pub family: String,
    pub supports_audio: bool,
    pub supports_image_conditioning: bool,
    pub supports_end_image_conditioning: bool,
    pub supports_reference_conditioning: bool,
    pub max_reference_images: usize,
}
