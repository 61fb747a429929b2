//! A Wan pipeline from GGUF files, as the reference serves them (`--model X.gguf`): the DiT
//! (city96's layout; a two-expert model as `<stem>-high-noise.gguf` + `<stem>-low-noise.gguf`),
//! the UMT5 encoder GGUF with its embedded tokenizer, and the Wan-named VAE safetensors, found
//! beside the DiT by [`companions`] or named in [`Companions`].
//!
//! What a diffusers folder says in its configs and these files do not: whether the model is
//! text- or image-to-video (read here from the DiT's input channels: `z_dim` for t2v,
//! `2 * z_dim` + the VAE's temporal factor for i2v), the scheduler and the expert boundary.
//! Those are Wan's recipe defaults ([`gguf_schedule`]): UniPC (order 2, bh2), with the flow
//! shift of the recipe — 3.0 for a single-network Wan 2.1 model (diffusers' Wan 2.1 configs at
//! the 832x480 default size), 12.0 with boundary 0.875 for Wan 2.2 T2V-A14B, 5.0 with
//! boundary 0.9 for I2V-A14B. A request's `flowShift` / `sampler` still override them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::scheduler::{SchedulerSpec, UniPcConfig};
use super::umt5_gguf::load_with_tokenizer;
use super::video_request::VideoError;
use super::wan_files::companions;
use super::wan_pipeline::{
    config_error, io_error, Companions, GraphDit, Parts, VideoDenoiser, VideoMode, WanPipeline,
};
use super::wan_vae::WanVae;
use crate::backend::cpu::CpuBackend;
use crate::backend::Backend;
use crate::tokenizer::Tokenizer;

/// The schedule a GGUF model runs by default, by (two experts, mode): the flow shift and the
/// expert boundary ratio (see the module docs).
pub fn gguf_schedule(two_experts: bool, mode: VideoMode) -> (f64, Option<f64>) {
    match (two_experts, mode) {
        (false, _) => (3.0, None),
        (true, VideoMode::TextToVideo) => (12.0, Some(0.875)),
        (true, VideoMode::ImageToVideo) => (5.0, Some(0.9)),
    }
}

/// A companion neither named nor found: what was looked for, and where.
fn missing(what: &str, dit: &Path, looked_for: String, flag: &str) -> VideoError {
    io_error(
        dit,
        format!("no {what} found for this DiT: looked for {looked_for}; name it with {flag}"),
    )
}

impl WanPipeline {
    /// Loads a Wan model from GGUF files (see the module docs), the DiT(s) on the CPU
    /// backend with one thread per physical core. `dit` is the model file (either expert of a
    /// pair); `given` names companions that are not beside it (`tokenizer`: a tokenizer.json
    /// to use instead of the UMT5 file's embedded one).
    pub fn load_gguf(dit: &Path, given: &Companions) -> Result<Self, VideoError> {
        Self::load_gguf_on(dit, given, Box::new(CpuBackend::new(0)))
    }

    /// [`WanPipeline::load_gguf`] with the DiT(s) on `backend`.
    pub fn load_gguf_on(
        dit: &Path,
        given: &Companions,
        backend: Box<dyn Backend>,
    ) -> Result<Self, VideoError> {
        if !dit.is_file() {
            return Err(io_error(dit, "no such file".into()));
        }
        let found = companions(dit);
        let dir = dit.parent().unwrap_or(Path::new("."));
        let shown = |name: &str| dir.join(name).display().to_string();
        let stem = &found.stem;
        let name = dit
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        // An expert pair: the high-noise file runs first whichever one was named.
        let (high, low): (PathBuf, Option<PathBuf>) =
            if name.ends_with("-high-noise") || name.ends_with("-low-noise") {
                let Some(other) = found.other_expert.clone() else {
                    let other = if name.ends_with("-high-noise") {
                        format!("{stem}-low-noise.gguf")
                    } else {
                        format!("{stem}-high-noise.gguf")
                    };
                    return Err(io_error(
                        dit,
                        format!(
                            "this is one expert of a two-expert model; the other, {}, is missing",
                            shown(&other)
                        ),
                    ));
                };
                if name.ends_with("-high-noise") {
                    (dit.to_path_buf(), Some(other))
                } else {
                    (other, Some(dit.to_path_buf()))
                }
            } else {
                (dit.to_path_buf(), None)
            };

        let te_path = given
            .text_encoder
            .clone()
            .or(found.text_encoder.clone())
            .ok_or_else(|| {
                missing(
                    "UMT5 text encoder",
                    dit,
                    format!(
                        "{} or a single *umt5*.gguf in {}",
                        shown(&format!("{stem}-umt5.gguf")),
                        dir.display()
                    ),
                    "--video-text-encoder",
                )
            })?;
        let (text_encoder, embedded) = load_with_tokenizer(&te_path)?;
        let tokenizer = match &given.tokenizer {
            Some(t) => {
                let file = if t.is_dir() {
                    t.join("tokenizer.json")
                } else {
                    t.clone()
                };
                let bytes = std::fs::read(&file).map_err(|e| io_error(&file, e.to_string()))?;
                Tokenizer::from_tokenizer_json(&bytes)
                    .map_err(|e| config_error(&file, e.to_string()))?
            }
            None => embedded,
        };
        let vae_path = given.vae.clone().or(found.vae.clone()).ok_or_else(|| {
            missing(
                "Wan VAE",
                dit,
                format!(
                    "{} or a single *vae*.safetensors in {}",
                    shown(&format!("{stem}-vae.safetensors")),
                    dir.display()
                ),
                "--video-vae",
            )
        })?;
        let vae = WanVae::load_file(&vae_path)?;

        let backend = Arc::new(Mutex::new(backend));
        let transformer: Box<dyn VideoDenoiser> = Box::new(GraphDit::load_gguf(&high, &backend)?);
        let transformer_2 = match &low {
            Some(low) => Some((
                low.clone(),
                Box::new(GraphDit::load_gguf(low, &backend)?) as Box<dyn VideoDenoiser>,
            )),
            None => None,
        };
        let z = vae.config.z_dim;
        let i2v_in = 2 * z + vae.config.temporal_factor();
        let mode = match transformer.in_channels() {
            c if c == z => VideoMode::TextToVideo,
            c if c == i2v_in => VideoMode::ImageToVideo,
            c => {
                return Err(config_error(
                    &high,
                    format!(
                        "in_channels {c} is neither text-to-video ({z}, the VAE's z_dim) nor \
                         image-to-video ({i2v_in})"
                    ),
                ))
            }
        };
        let (flow_shift, boundary_ratio) = gguf_schedule(transformer_2.is_some(), mode);
        Self::assemble(Parts {
            tokenizer,
            text_encoder,
            vae,
            transformer: (high, transformer),
            transformer_2,
            scheduler: SchedulerSpec::UniPc(UniPcConfig {
                flow_shift,
                ..UniPcConfig::default()
            }),
            boundary_ratio,
            mode,
        })
    }
}
