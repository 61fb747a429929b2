//! Wan text-to-video and image-to-video generation: the orchestration of the tokenizer, the
//! UMT5 text encoder, the DiT (one or two experts), a scheduler with classifier-free guidance
//! and the VAE, as diffusers' `WanPipeline` / `WanImageToVideoPipeline` run them.
//!
//! Image-to-video is Wan 2.2 A14B's conditioning: the first frame followed by zero frames goes
//! through the VAE encoder, and 4 mask channels (1 on the first latent frame) plus those
//! latents are appended to the noisy latents as the DiT's extra input channels. Wan 2.1 I2V
//! (a CLIP image tower) and Wan 2.2 TI2V-5B (per-token timesteps, another VAE) are refused
//! by name when loading.
//!
//! The DiT is reached through one narrow call, [`VideoDenoiser::predict`]; [`GraphDit`] is
//! Wan's DiT as a backend graph (CPU by default, any backend through
//! [`WanPipeline::load_on`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::files::{read_config, ModelFileError};
use super::guidance::{classifier_free_guidance, Expert, ExpertSwitch};
use super::noise::gaussian_noise;
use super::scheduler::{FlowMatchEulerConfig, SchedulerSpec};
use super::umt5::{zero_padding_rows, Umt5Encoder};
use super::video_request::{
    resolve, Control, Limits, Phase, Progress, Recipe, Sampler, VideoError, VideoRequest,
    VideoSettings,
};
use super::wan_dit::{WanDit, WanDitError};
use super::wan_vae::{frames_to_u8, WanVae};
use super::wan_vae_blocks::Clip;
use crate::backend::cpu::CpuBackend;
use crate::backend::Backend;
use crate::tokenizer::Tokenizer;

/// The denoising network as the pipeline uses it: one flow prediction per call.
pub trait VideoDenoiser: Send + Sync {
    /// Channels of the latents `predict` takes (the noisy latents plus any condition).
    fn in_channels(&self) -> usize;
    /// Width of one text row `predict` takes.
    fn text_dim(&self) -> usize;
    /// Latent pixels per token, each way (`[frames, rows, columns]`).
    fn patch_size(&self) -> [usize; 3];
    /// The flow velocity `[out_channels, T, H, W]` for `latents` `[in_channels, T, H, W]`
    /// (`grid` = `[T, H, W]`) at `timestep`, conditioned on `text` rows.
    fn predict(
        &self,
        latents: &[f32],
        grid: [usize; 3],
        timestep: f32,
        text: &[f32],
    ) -> Result<Vec<f32>, VideoError>;
}

/// A Wan DiT as the pipeline's denoiser: the graph version, on the backend its weights were
/// loaded into. The backend is shared by both experts of a two-expert model (one set of
/// kernels, one thread pool) and locked for each prediction, so a pipeline can sit behind an
/// `Arc` in the server.
pub struct GraphDit {
    dit: WanDit,
    backend: Arc<Mutex<Box<dyn Backend>>>,
}

impl GraphDit {
    /// Loads a diffusers `transformer/` folder into `backend`.
    pub fn load_diffusers(
        dir: &Path,
        backend: &Arc<Mutex<Box<dyn Backend>>>,
    ) -> Result<Self, VideoError> {
        Self::load_into(backend, |b| WanDit::load_diffusers(dir, b))
    }

    /// Loads a Wan DiT GGUF file (city96's layout) into `backend`.
    pub fn load_gguf(
        path: &Path,
        backend: &Arc<Mutex<Box<dyn Backend>>>,
    ) -> Result<Self, VideoError> {
        Self::load_into(backend, |b| WanDit::load_gguf(path, b))
    }

    /// Runs `load` on the locked backend and keeps a handle to it for predictions.
    fn load_into(
        backend: &Arc<Mutex<Box<dyn Backend>>>,
        load: impl FnOnce(&mut dyn Backend) -> Result<WanDit, WanDitError>,
    ) -> Result<Self, VideoError> {
        let dit = load(lock(backend).as_mut())?;
        Ok(GraphDit {
            dit,
            backend: backend.clone(),
        })
    }
}

/// The backend, even if a panicking prediction poisoned its lock (the backend holds weights
/// and kernels only; a failed step leaves nothing half-written that a later step reads).
fn lock(backend: &Mutex<Box<dyn Backend>>) -> std::sync::MutexGuard<'_, Box<dyn Backend>> {
    backend.lock().unwrap_or_else(|e| e.into_inner())
}

impl VideoDenoiser for GraphDit {
    fn in_channels(&self) -> usize {
        self.dit.config.in_channels
    }
    fn text_dim(&self) -> usize {
        self.dit.config.text_dim
    }
    fn patch_size(&self) -> [usize; 3] {
        self.dit.config.patch_size
    }
    fn predict(
        &self,
        latents: &[f32],
        grid: [usize; 3],
        timestep: f32,
        text: &[f32],
    ) -> Result<Vec<f32>, VideoError> {
        let mut guard = lock(&self.backend);
        Ok(self
            .dit
            .forward(guard.as_mut(), latents, grid, timestep, text)?)
    }
}

/// Where the components a model folder lacks are; `None`: the folder's own
/// `text_encoder/`, `tokenizer/`, `vae/`, else the first sibling folder (in name order) that
/// has one (a Wan 2.2 I2V folder shipped beside the T2V one, as the reference scans).
#[derive(Clone, Debug, Default)]
pub struct Companions {
    pub text_encoder: Option<PathBuf>,
    /// A folder with tokenizer.json, or the file itself.
    pub tokenizer: Option<PathBuf>,
    pub vae: Option<PathBuf>,
}

/// Whether a model makes video from text alone or from a first frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VideoMode {
    TextToVideo,
    ImageToVideo,
}

/// A finished generation.
#[derive(Clone, Debug)]
pub struct Video {
    pub width: usize,
    pub height: usize,
    pub frames: usize,
    /// RGB bytes, `[frames, height, width, 3]`.
    pub rgb: Vec<u8>,
    /// The denoised latents `[z_dim, t, h, w]` before the VAE's denormalisation.
    pub latents: Vec<f32>,
    pub settings: VideoSettings,
}

/// A pipeline's loaded parts, before [`WanPipeline::assemble`] checks that they fit; each
/// DiT with the path its errors name.
pub(super) struct Parts {
    pub tokenizer: Tokenizer,
    pub text_encoder: Umt5Encoder,
    pub vae: WanVae,
    pub transformer: (PathBuf, Box<dyn VideoDenoiser>),
    pub transformer_2: Option<(PathBuf, Box<dyn VideoDenoiser>)>,
    pub scheduler: SchedulerSpec,
    pub boundary_ratio: Option<f64>,
    pub mode: VideoMode,
}

/// A loaded Wan pipeline (from a diffusers folder, or GGUF files: `wan_pipeline_gguf`).
pub struct WanPipeline {
    tokenizer: Tokenizer,
    text_encoder: Umt5Encoder,
    vae: WanVae,
    /// The first (high-noise) expert, the only one of single-network models.
    transformer: Box<dyn VideoDenoiser>,
    transformer_2: Option<Box<dyn VideoDenoiser>>,
    scheduler: SchedulerSpec,
    switch: ExpertSwitch,
    mode: VideoMode,
    /// Text rows the encoder's output is padded to (the pipelines' `max_sequence_length`).
    pub max_sequence_length: usize,
    pub recipe: Recipe,
    pub limits: Limits,
}

/// Wan's official negative prompt (its generate.py / config default), used when a request
/// names none.
pub const WAN_NEGATIVE_PROMPT: &str = "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，最差质量，低质量，JPEG压缩残留，丑陋的，残缺的，多余的手指，画得不好的手部，画得不好的脸部，畸形的，毁容的，形态畸形的肢体，手指融合，静止不动的画面，杂乱的背景，三条腿，背景人很多，倒着走";

pub(super) fn io_error(path: &Path, message: String) -> VideoError {
    VideoError::Model(ModelFileError::Io {
        path: path.display().to_string(),
        message,
    })
}

pub(super) fn config_error(path: &Path, message: String) -> VideoError {
    VideoError::Model(ModelFileError::Config {
        path: path.display().to_string(),
        message,
    })
}

/// Component `name` of model folder `dir`: `given`, else `dir/name`, else a sibling's.
fn component(dir: &Path, name: &str, given: Option<&Path>) -> Result<PathBuf, VideoError> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    let own = dir.join(name);
    if own.is_dir() {
        return Ok(own);
    }
    if let Some(parent) = dir.parent() {
        let mut siblings: Vec<PathBuf> = std::fs::read_dir(parent)
            .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        siblings.sort();
        if let Some(found) = siblings
            .iter()
            .map(|s| s.join(name))
            .find(|p| p.is_dir() && p.parent() != Some(dir))
        {
            return Ok(found);
        }
    }
    Err(io_error(
        dir,
        format!("no {name}/ in this folder or a sibling folder; name it explicitly"),
    ))
}

impl WanPipeline {
    /// Loads a diffusers Wan pipeline folder (model_index.json, scheduler/, transformer/,
    /// transformer_2/ for two-expert models, and the companions), the DiT on the CPU backend
    /// with one thread per physical core.
    pub fn load(dir: &Path, companions: &Companions) -> Result<Self, VideoError> {
        Self::load_on(dir, companions, Box::new(CpuBackend::new(0)))
    }

    /// [`WanPipeline::load`] with the DiT on `backend`.
    pub fn load_on(
        dir: &Path,
        companions: &Companions,
        backend: Box<dyn Backend>,
    ) -> Result<Self, VideoError> {
        let index_path = dir.join("model_index.json");
        let index = read_config(&index_path)?;
        let class = index["_class_name"].as_str().unwrap_or("");
        let mode = match class {
            "WanPipeline" => VideoMode::TextToVideo,
            "WanImageToVideoPipeline" => VideoMode::ImageToVideo,
            other => {
                return Err(config_error(
                    &index_path,
                    format!("pipeline {other:?} is not WanPipeline or WanImageToVideoPipeline"),
                ))
            }
        };
        if index["expand_timesteps"].as_bool() == Some(true) {
            return Err(config_error(
                &index_path,
                "expand_timesteps (Wan 2.2 TI2V-5B) is not supported yet".into(),
            ));
        }
        let present = |key: &str| index[key].as_array().is_some_and(|a| !a[0].is_null());
        if present("image_encoder") {
            return Err(config_error(
                &index_path,
                "a CLIP image_encoder (Wan 2.1 I2V) is not supported yet".into(),
            ));
        }
        let boundary_ratio = index["boundary_ratio"].as_f64();

        let te_dir = component(dir, "text_encoder", companions.text_encoder.as_deref())?;
        let text_encoder = Umt5Encoder::load(&te_dir)
            .map_err(|e| config_error(&te_dir, format!("text encoder: {e}")))?;
        let tok_dir = component(dir, "tokenizer", companions.tokenizer.as_deref())?;
        let tok_file = if tok_dir.is_dir() {
            tok_dir.join("tokenizer.json")
        } else {
            tok_dir
        };
        let bytes = std::fs::read(&tok_file).map_err(|e| io_error(&tok_file, e.to_string()))?;
        let tokenizer = Tokenizer::from_tokenizer_json(&bytes)
            .map_err(|e| config_error(&tok_file, e.to_string()))?;
        let vae_dir = component(dir, "vae", companions.vae.as_deref())?;
        let vae = WanVae::load(&vae_dir)?;

        let backend = Arc::new(Mutex::new(backend));
        let transformer: Box<dyn VideoDenoiser> = Box::new(GraphDit::load_diffusers(
            &dir.join("transformer"),
            &backend,
        )?);
        let transformer_2: Option<Box<dyn VideoDenoiser>> = if present("transformer_2") {
            Some(Box::new(GraphDit::load_diffusers(
                &dir.join("transformer_2"),
                &backend,
            )?))
        } else {
            None
        };
        let sched_path = dir.join("scheduler/scheduler_config.json");
        let scheduler = SchedulerSpec::from_diffusers_config(&read_config(&sched_path)?)?;
        Self::assemble(Parts {
            tokenizer,
            text_encoder,
            vae,
            transformer: (dir.join("transformer"), transformer),
            transformer_2: transformer_2.map(|t| (dir.join("transformer_2"), t)),
            scheduler,
            boundary_ratio,
            mode,
        })
    }

    /// The pipeline from its loaded parts, once they are checked to fit together (text width,
    /// latent channels) — shared by the folder and the GGUF loaders.
    pub(super) fn assemble(p: Parts) -> Result<Self, VideoError> {
        let Parts {
            tokenizer,
            text_encoder,
            vae,
            transformer,
            transformer_2,
            scheduler,
            boundary_ratio,
            mode,
        } = p;
        let num_train_timesteps = match &scheduler {
            SchedulerSpec::UniPc(c) => c.num_train_timesteps,
            SchedulerSpec::FlowMatchEuler(c) => c.num_train_timesteps,
        };

        // The pieces must fit together: text width, latent channels (the i2v condition is
        // the VAE's temporal factor in mask channels plus z_dim latent channels).
        let z = vae.config.z_dim;
        let want_in = match mode {
            VideoMode::TextToVideo => z,
            VideoMode::ImageToVideo => z + vae.config.temporal_factor() + z,
        };
        for (path, t) in std::iter::once(&transformer).chain(transformer_2.iter()) {
            if t.text_dim() != text_encoder.config.d_model {
                return Err(config_error(
                    path,
                    format!(
                        "text_dim {} does not match the text encoder's d_model {}",
                        t.text_dim(),
                        text_encoder.config.d_model
                    ),
                ));
            }
            if t.in_channels() != want_in {
                return Err(config_error(
                    path,
                    format!(
                        "in_channels {} does not fit {mode:?} with a z_dim {z} VAE \
                         (expected {want_in})",
                        t.in_channels()
                    ),
                ));
            }
        }
        let (transformer, transformer_2) = (transformer.1, transformer_2.map(|t| t.1));
        let two = transformer_2.is_some();
        let recipe = Recipe {
            width: 832,
            height: 480,
            frames: 33,
            steps: if two { 40 } else { 30 },
            cfg: match (two, mode) {
                (true, VideoMode::ImageToVideo) => 3.5,
                (true, VideoMode::TextToVideo) => 4.0,
                (false, _) => 6.0,
            },
            cfg2: match (two, mode) {
                (true, VideoMode::ImageToVideo) => 3.5,
                (true, VideoMode::TextToVideo) => 3.0,
                (false, _) => 6.0,
            },
            fps: 16,
            negative_prompt: WAN_NEGATIVE_PROMPT.to_string(),
        };
        Ok(WanPipeline {
            tokenizer,
            text_encoder,
            vae,
            transformer,
            transformer_2,
            scheduler,
            switch: ExpertSwitch {
                boundary_ratio,
                num_train_timesteps,
            },
            mode,
            max_sequence_length: 512,
            recipe,
            limits: Limits::default(),
        })
    }

    pub fn mode(&self) -> VideoMode {
        self.mode
    }

    /// Whether the model has a second (low-noise) expert and so uses `cfg2`.
    pub fn has_two_experts(&self) -> bool {
        self.transformer_2.is_some()
    }

    /// Output pixels per token, each way: sizes snap to multiples of it.
    pub fn size_grid(&self) -> usize {
        let [_, ph, pw] = self.transformer.patch_size();
        self.vae.config.spatial_factor() * ph.max(pw)
    }

    /// Frames per latent frame after the first: frame counts snap to `1 + k * this`.
    pub fn frame_step(&self) -> usize {
        self.vae.config.temporal_factor()
    }

    /// The settings `request` would run with, or why it cannot run on this model.
    pub fn settings(&self, request: &VideoRequest) -> Result<VideoSettings, VideoError> {
        match (self.mode, request.image.is_some()) {
            (VideoMode::TextToVideo, true) => {
                return Err(VideoError::Request(
                    "this model is text-to-video only: it takes no image".into(),
                ))
            }
            (VideoMode::ImageToVideo, false) => {
                return Err(VideoError::Request(
                    "this image-to-video model needs an image (the first frame)".into(),
                ))
            }
            _ => {}
        }
        resolve(
            request,
            &self.recipe,
            &self.limits,
            self.size_grid(),
            self.frame_step(),
        )
    }

    /// Runs a generation. `progress` hears each phase's start (step 0) and end, and every
    /// denoising step; answering [`Control::Stop`] ends the run with
    /// [`VideoError::Cancelled`] before the next piece of work.
    pub fn generate(
        &self,
        request: &VideoRequest,
        progress: &mut dyn FnMut(Progress) -> Control,
    ) -> Result<Video, VideoError> {
        let s = self.settings(request)?;
        let mut report = |phase: Phase, step: usize, total: usize| match progress(Progress {
            phase,
            step,
            total,
        }) {
            Control::Continue => Ok(()),
            Control::Stop => Err(VideoError::Cancelled),
        };
        let (fs, ft) = (self.vae.config.spatial_factor(), self.frame_step());
        let z = self.vae.config.z_dim;
        let grid = [1 + (s.frames - 1) / ft, s.height / fs, s.width / fs];
        let len = z * grid.iter().product::<usize>();
        let mut latents = match &request.noise {
            Some(n) if n.len() != len => {
                return Err(VideoError::Request(format!(
                    "the initial noise has {} values; {}x{} with {} frames needs {len}",
                    n.len(),
                    s.width,
                    s.height,
                    s.frames
                )))
            }
            Some(n) => n.clone(),
            None => gaussian_noise(s.seed, len),
        };

        // diffusers decides on guidance by the first scale alone.
        let guided = s.cfg > 1.0;
        report(Phase::TextEncode, 0, 1)?;
        let prompt = self.encode_text(&request.prompt)?;
        let negative = if guided {
            Some(self.encode_text(&s.negative_prompt)?)
        } else {
            None
        };
        report(Phase::TextEncode, 1, 1)?;

        let condition = match &request.image {
            Some(image) => {
                report(Phase::ImageEncode, 0, 1)?;
                let c = self.image_condition(image, &s, grid)?;
                report(Phase::ImageEncode, 1, 1)?;
                c
            }
            None => Vec::new(),
        };

        let spec = match s.sampler {
            Sampler::UniPc => self.scheduler.clone(),
            Sampler::Euler => SchedulerSpec::FlowMatchEuler(FlowMatchEulerConfig {
                num_train_timesteps: self.switch.num_train_timesteps,
                shift: match &self.scheduler {
                    SchedulerSpec::UniPc(c) => c.flow_shift,
                    SchedulerSpec::FlowMatchEuler(c) => c.shift,
                },
            }),
        };
        let spec = match s.flow_shift {
            Some(shift) => spec.with_shift(shift),
            None => spec,
        };
        let mut scheduler = spec.build(s.steps)?;
        let timesteps = scheduler.timesteps().to_vec();
        report(Phase::Denoise, 0, s.steps)?;
        for (i, &t) in timesteps.iter().enumerate() {
            let expert = self.switch.expert(t);
            let (net, scale) = match (expert, &self.transformer_2) {
                (Expert::Low, Some(low)) => (low, s.cfg2),
                _ => (&self.transformer, s.cfg),
            };
            let mut x = latents.clone();
            x.extend_from_slice(&condition);
            let mut velocity = net.predict(&x, grid, t, &prompt)?;
            if let Some(negative) = &negative {
                let uncond = net.predict(&x, grid, t, negative)?;
                classifier_free_guidance(&mut velocity, &uncond, scale)?;
            }
            scheduler.step(&velocity, &mut latents)?;
            report(Phase::Denoise, i + 1, s.steps)?;
        }

        report(Phase::VaeDecode, 0, 1)?;
        let mut decoded = latents.clone();
        self.vae.denormalize(&mut decoded);
        let frames = self.vae.decode(&decoded, [z, grid[0], grid[1], grid[2]])?;
        let rgb = frames_to_u8(&frames);
        report(Phase::VaeDecode, 1, 1)?;
        Ok(Video {
            width: frames.w,
            height: frames.h,
            frames: frames.t,
            rgb,
            latents,
            settings: s,
        })
    }

    /// The pipeline's text encoding: cleaned text, ids with `</s>`, truncated to and padded
    /// with zero rows up to `max_sequence_length` rows.
    pub fn encode_text(&self, text: &str) -> Result<Vec<f32>, VideoError> {
        let max = self.max_sequence_length.max(1);
        let mut ids = self.tokenizer.encode(&clean_prompt(text), true, false);
        if ids.len() > max {
            // Tokenizers truncate the text and keep the closing `</s>`.
            let last = *ids.last().unwrap_or(&0);
            ids.truncate(max - 1);
            ids.push(last);
        }
        let d = self.text_encoder.config.d_model;
        if ids.is_empty() {
            return Ok(vec![0.0; max * d]);
        }
        // Padding keys are masked, so the real rows do not depend on them: encoding the real
        // tokens alone gives the same rows, and the padding rows are zeroed anyway.
        let mask = vec![1u8; ids.len()];
        let mut rows = self
            .text_encoder
            .encode(&ids, &mask)
            .map_err(|e| VideoError::Request(format!("text encoder: {e}")))?;
        zero_padding_rows(&mut rows, &mask, d);
        rows.resize(max * d, 0.0);
        Ok(rows)
    }

    /// The i2v condition `[mask (temporal factor channels), z_dim latents]` over the latent
    /// grid: the first frame (resized to the output size) then zero frames, VAE-encoded and
    /// normalised, and a mask that is 1 on the first latent frame.
    fn image_condition(
        &self,
        image: &image::RgbImage,
        s: &VideoSettings,
        grid: [usize; 3],
    ) -> Result<Vec<f32>, VideoError> {
        let (w, h) = (s.width, s.height);
        let resized;
        let image = if (image.width() as usize, image.height() as usize) == (w, h) {
            image
        } else {
            resized = image::imageops::resize(
                image,
                w as u32,
                h as u32,
                image::imageops::FilterType::Lanczos3,
            );
            &resized
        };
        let p = w * h;
        let mut pixels = vec![0f32; 3 * s.frames * p];
        for (i, px) in image.pixels().enumerate() {
            for c in 0..3 {
                pixels[c * s.frames * p + i] = 2.0 * (px.0[c] as f32 / 255.0) - 1.0;
            }
        }
        let encoded = self.vae.encode(&pixels, [3, s.frames, h, w])?;
        let Clip { mut data, .. } = encoded;
        self.vae.normalize(&mut data);
        let mask_channels = self.frame_step();
        let plane = grid[1] * grid[2];
        let mut condition = vec![0f32; mask_channels * grid[0] * plane];
        for c in 0..mask_channels {
            let first = c * grid[0] * plane;
            condition[first..first + plane].fill(1.0);
        }
        condition.extend_from_slice(&data);
        Ok(condition)
    }
}

/// diffusers' prompt cleaning as far as it changes these texts: runs of whitespace become one
/// space, and the ends are trimmed.
fn clean_prompt(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
