//! The plain-Rust parts of diffusion generation: noise schedulers, classifier-free guidance and,
//! until the graph has a relative-position-bias attention op, Wan's UMT5 text encoder.
//!
//! The networks (the Wan DiT, its UMT5 text encoder, the video VAE) are graphs on the backend
//! trait like the text models; what runs between two network calls — combining the
//! conditional and unconditional predictions, choosing the expert of a two-expert model, and
//! stepping the latents — is ordinary arithmetic on f32 slices and lives here. Each piece
//! follows diffusers' implementation (the reference the tests compare with, see
//! `tests/data/video/README.md`) down to the f32 rounding of its scalar algebra, so a run can
//! be checked against diffusers step by step.

mod files;
mod gguf_out;
pub mod guidance;
pub mod noise;
pub mod scheduler;
pub mod umt5;
mod umt5_buckets;
pub mod umt5_gguf;
pub mod umt5_names;
pub mod umt5_tokenizer;
mod umt5_vocab;
pub mod video_request;
pub mod wan_convert;
pub mod wan_dit;
mod wan_dit_weights;
pub mod wan_files;
pub mod wan_gguf;
pub mod wan_names;
pub mod wan_pipeline;
pub mod wan_pipeline_gguf;
mod wan_rope;
pub mod wan_vae;
mod wan_vae_blocks;
pub mod wan_vae_file;
pub mod wan_vae_names;

pub use files::ModelFileError;
pub use guidance::{classifier_free_guidance, Expert, ExpertSwitch};
pub use scheduler::{
    FlowMatchEuler, FlowMatchEulerConfig, NoiseScheduler, SchedulerError, SchedulerSpec, UniPc,
    UniPcConfig,
};
pub use umt5::{zero_padding_rows, Umt5Config, Umt5Encoder, Umt5Error};
pub use video_request::{
    Control, Limits, Phase, Progress, Recipe, Sampler, VideoError, VideoRequest, VideoSettings,
};
pub use wan_gguf::{open_dit, WanDitInfo};
pub use wan_names::open_diffusers_dit;
pub use wan_pipeline::{Companions, GraphDit, Video, VideoDenoiser, VideoMode, WanPipeline};
pub use wan_vae::{frames_to_u8, WanVae, WanVaeConfig, WanVaeError};
pub use wan_vae_blocks::Clip;
