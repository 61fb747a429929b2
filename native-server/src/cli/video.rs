//! `weft video`: a video from a prompt (and a first frame, for image-to-video models) with a
//! Wan model, written as an H.264 MP4.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use weft_core::diffusion::{Companions, Control, Sampler, VideoRequest};

use super::progress::Reporter;
use crate::video_gen::{decode_first_frame, load_video_model, random_seed, to_mp4};

#[derive(Args)]
pub struct VideoArgs {
    /// A diffusers Wan pipeline folder (model_index.json, transformer/, scheduler/, ...) or a
    /// Wan DiT GGUF (either file of a `-high-noise` / `-low-noise` pair) with its
    /// `-umt5.gguf` and `-vae.safetensors` beside it.
    #[arg(long)]
    model: PathBuf,
    /// The first frame (PNG, JPEG, WebP), for image-to-video models.
    #[arg(long)]
    image: Option<PathBuf>,
    #[arg(long)]
    prompt: String,
    /// Default: the model's official negative prompt.
    #[arg(long)]
    negative_prompt: Option<String>,
    /// Pixels; rounded up to the model's grid (16 for Wan 2.1). Default 832.
    #[arg(long)]
    width: Option<usize>,
    /// Pixels; rounded up to the model's grid. Default 480.
    #[arg(long)]
    height: Option<usize>,
    /// Snapped to 4k+1. Default 33.
    #[arg(long)]
    frames: Option<usize>,
    /// Denoising steps (default: the model's recipe, 30 or 40).
    #[arg(long)]
    steps: Option<usize>,
    /// Guidance scale (of the high-noise expert of a two-expert model).
    #[arg(long)]
    cfg: Option<f32>,
    /// Guidance scale of the low-noise expert (two-expert models).
    #[arg(long)]
    cfg2: Option<f32>,
    /// Default: a random seed, printed.
    #[arg(long)]
    seed: Option<u64>,
    #[arg(long, default_value_t = 16)]
    fps: u32,
    /// The scheduler's time shift (default: the model folder's; Wan's recipe for a GGUF).
    #[arg(long)]
    flow_shift: Option<f64>,
    /// unipc (default) or euler.
    #[arg(long)]
    sampler: Option<String>,
    /// The UMT5 text encoder (a folder; the UMT5 GGUF for a GGUF model), when not in or
    /// beside the model.
    #[arg(long)]
    video_text_encoder: Option<PathBuf>,
    /// The tokenizer folder (or tokenizer.json), when not in or beside the model folder.
    #[arg(long)]
    video_tokenizer: Option<PathBuf>,
    /// The VAE (a folder, or Wan-named safetensors), when not in or beside the model.
    #[arg(long)]
    video_vae: Option<PathBuf>,
    /// Where to write the MP4.
    #[arg(short = 'o', long)]
    output: PathBuf,
}

pub fn run(a: VideoArgs) -> Result<()> {
    let sampler = a.sampler.as_deref().map(Sampler::parse).transpose()?;
    if a.fps == 0 || a.fps > 120 {
        bail!("--fps must be between 1 and 120");
    }
    let image = match &a.image {
        Some(p) => {
            let bytes = std::fs::read(p).with_context(|| format!("{}", p.display()))?;
            Some(
                decode_first_frame(&bytes)
                    .map_err(anyhow::Error::msg)
                    .with_context(|| format!("{}", p.display()))?,
            )
        }
        None => None,
    };
    let companions = Companions {
        text_encoder: a.video_text_encoder,
        tokenizer: a.video_tokenizer,
        vae: a.video_vae,
    };
    let started = Instant::now();
    let pipeline = load_video_model(&a.model, &companions)?;
    let seed = a.seed.unwrap_or_else(random_seed);
    let request = VideoRequest {
        prompt: a.prompt,
        negative_prompt: a.negative_prompt,
        width: a.width,
        height: a.height,
        frames: a.frames,
        steps: a.steps,
        cfg: a.cfg,
        cfg2: a.cfg2,
        seed,
        flow_shift: a.flow_shift,
        sampler,
        image,
        noise: None,
    };
    let settings = pipeline.settings(&request)?;
    eprintln!(
        "weft: {}x{}, {} frames, {} steps, cfg {}{}, {} sampler, seed {seed}",
        settings.width,
        settings.height,
        settings.frames,
        settings.steps,
        settings.cfg,
        if pipeline.has_two_experts() {
            format!(" / {}", settings.cfg2)
        } else {
            String::new()
        },
        settings.sampler.name(),
    );
    let mut bar = Reporter::new(false);
    let video = pipeline.generate(&request, &mut |p| {
        bar.update(p.phase.name(), p.step as u64, p.total as u64);
        Control::Continue
    })?;
    bar.finish();
    let mp4 = to_mp4(&video, a.fps)?;
    std::fs::write(&a.output, &mp4).with_context(|| format!("{}", a.output.display()))?;
    eprintln!(
        "weft: wrote {} ({} frames, {}x{}, {} fps, {} bytes) in {:.1} s",
        a.output.display(),
        video.frames,
        video.width,
        video.height,
        a.fps,
        mp4.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
