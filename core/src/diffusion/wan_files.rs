//! Finding a Wan DiT file's companions beside it: the other expert of a two-expert model,
//! the UMT5 text encoder and the VAE. The rule (docs/video-generation.md), for a DiT file
//! `D/<stem>.gguf`, `D/<stem>-high-noise.gguf` or `D/<stem>-low-noise.gguf`:
//!
//! - the other expert: `<stem>-low-noise.gguf` for `<stem>-high-noise.gguf` and back;
//! - the text encoder: `<stem>-umt5.gguf`, else the only `*umt5*.gguf` in `D`;
//! - the VAE: `<stem>-vae.safetensors`, else the only `*vae*.safetensors` in `D` (ComfyUI's
//!   `wan_2.1_vae.safetensors` qualifies).
//!
//! `weft convert` names its files so (see `wan_convert`); files downloaded one by one (city96's
//! DiT, `umt5-xxl-encoder-Q8_0.gguf`, `wan_2.1_vae.safetensors`) are found by the fallbacks when
//! each kind is alone in the folder. An ambiguous fallback finds nothing: the flags
//! (`--video-text-encoder`, `--video-vae`) then say which.

use std::path::{Path, PathBuf};

const HIGH: &str = "-high-noise";
const LOW: &str = "-low-noise";

/// What was found beside a DiT file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Companions {
    /// The stem the names derive from (the DiT's file stem without the expert suffix).
    pub stem: String,
    pub other_expert: Option<PathBuf>,
    pub text_encoder: Option<PathBuf>,
    pub vae: Option<PathBuf>,
}

/// The only file in `dir` whose lower-cased name contains `part` and ends with `ext`.
fn only_file(dir: &Path, part: &str, ext: &str) -> Option<PathBuf> {
    let mut found = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy().to_lowercase();
                    n.contains(part) && n.ends_with(ext)
                })
        });
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// The companions of the DiT file `dit` (see the module docs).
pub fn companions(dit: &Path) -> Companions {
    let dir = dit.parent().unwrap_or(Path::new("."));
    let file_stem = dit
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (stem, other) = if let Some(s) = file_stem.strip_suffix(HIGH) {
        (s.to_string(), Some(format!("{s}{LOW}.gguf")))
    } else if let Some(s) = file_stem.strip_suffix(LOW) {
        (s.to_string(), Some(format!("{s}{HIGH}.gguf")))
    } else {
        (file_stem, None)
    };
    let exact = |name: String| Some(dir.join(name)).filter(|p| p.is_file());
    Companions {
        other_expert: other.and_then(exact),
        text_encoder: exact(format!("{stem}-umt5.gguf"))
            .or_else(|| only_file(dir, "umt5", ".gguf")),
        vae: exact(format!("{stem}-vae.safetensors"))
            .or_else(|| only_file(dir, "vae", ".safetensors")),
        stem,
    }
}
