//! `weft convert` of a diffusers Wan pipeline folder (model_index.json naming `WanPipeline` or
//! `WanImageToVideoPipeline`): the DiT (or its two experts), the UMT5 text encoder and the VAE
//! written into one output folder, named so the video runtime finds the companions beside the
//! DiT (core's `diffusion::wan_convert`, docs/video-generation.md). Local only: the files are
//! not models of the text store.

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use weft_core::diffusion::wan_convert::{convert_pipeline, wan_pipeline_class};
use weft_core::quantize::FileType;

use super::progress::Reporter;

/// Whether `dir` is a diffusers Wan pipeline folder.
pub fn is_wan_pipeline(dir: &Path) -> bool {
    wan_pipeline_class(dir).is_some()
}

/// Converts `dir` into the folder `output` (`--type` as the text convert reads it; default:
/// every tensor in its stored float type).
pub fn convert(dir: &Path, output: Option<&str>, r#type: Option<&str>) -> Result<()> {
    let Some(out) = output else {
        bail!(
            "{}: a Wan pipeline converts to several files (DiT, text encoder, VAE): name the \
             output folder with -o DIR",
            dir.display()
        );
    };
    if out.ends_with(".gguf") {
        bail!(
            "-o {out}: a Wan pipeline converts to several files: give a folder, not a .gguf path"
        );
    }
    let target = r#type
        .map(|t| {
            t.parse::<FileType>()
                .map_err(|e| anyhow!("--type {t}: {e}"))
        })
        .transpose()?;
    let mut rep = Reporter::new(true);
    let started = std::time::Instant::now();
    let done = convert_pipeline(dir, Path::new(out), None, target, &mut |phase, d, t| {
        rep.update(phase, d, t);
        true
    });
    rep.finish();
    let done = done.map_err(|e| anyhow!("{e}"))?;
    println!(
        "converted {} in {:.2} s:",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    for w in &done.written {
        println!(
            "  {} ({}, {})",
            w.path.display(),
            w.role.describe(),
            indicatif::HumanBytes(w.bytes)
        );
    }
    for m in &done.missing {
        println!("  {m}: named by model_index.json but not in the folder, not written");
    }
    Ok(())
}
