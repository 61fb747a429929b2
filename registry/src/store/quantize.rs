//! Quantizing a model of the store (or a file) into a new model of the store (or a file).

use std::io::BufWriter;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use weft_core::gguf::ModelFile;
use weft_core::quantize::{
    plan, quantize_model, FileType, Progress, QuantizeError, QuantizeOptions,
};

use super::{finish, write_error, Cleanup, Store, StoreError};
use crate::registry::names;

/// What to quantize.
#[derive(Clone, Debug, Deserialize)]
pub struct QuantizeRequest {
    /// A model name in the store (or, from the CLI, a file path).
    #[serde(alias = "model")]
    pub source: String,
    /// The new model's name (or, from the CLI, an output path); default `<source>-<type>`.
    #[serde(default, alias = "name")]
    pub target: Option<String>,
    /// `Q4_K_M`, `q8_0`, `F16` ... (case-insensitive).
    #[serde(alias = "quantize")]
    pub r#type: String,
    #[serde(default)]
    pub allow_requantize: bool,
    #[serde(default)]
    pub pure: bool,
    #[serde(default)]
    pub threads: Option<usize>,
}

/// What a quantization made.
#[derive(Clone, Debug, Serialize)]
pub struct Quantized {
    /// The model name, when it went into the store.
    pub name: Option<String>,
    pub path: PathBuf,
    pub r#type: String,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub seconds: f64,
}

fn looks_like_path(s: &str) -> bool {
    s.contains('/') || s.ends_with(".gguf")
}

/// The source file: a path (when `paths` allows and it exists) or a model name.
fn source_file(store: &Store, src: &str, paths: bool) -> Result<(String, PathBuf), StoreError> {
    if paths && looks_like_path(src) && Path::new(src).is_file() {
        return Ok((names::from_file(Path::new(src)), PathBuf::from(src)));
    }
    let c = store.catalog()?;
    let r = c
        .resolve(src)
        .map_err(|e| StoreError::invalid(e.to_string()))?;
    Ok((r.name, r.facts.path.clone()))
}

/// Quantizes as `req` says. `paths` lets `source`/`target` be file paths (the CLI); the server
/// uses names only. `progress` returning false cancels; nothing is left behind on failure.
pub fn quantize_in_store(
    store: &Store,
    req: &QuantizeRequest,
    paths: bool,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<Quantized, StoreError> {
    let ftype: FileType = req
        .r#type
        .parse()
        .map_err(|e: weft_core::quantize::UnknownFileType| StoreError::invalid(e.to_string()))?;
    let (src_name, src_path) = source_file(store, &req.source, paths)?;
    let target = req.target.clone().unwrap_or_else(|| {
        format!(
            "{}-{}",
            src_name.replace(':', "-"),
            ftype.name().to_ascii_lowercase()
        )
    });
    let (name, dest, tmp) = if paths && looks_like_path(&target) {
        let dest = PathBuf::from(&target);
        let tmp = PathBuf::from(format!("{target}.partial"));
        (None, dest, tmp)
    } else {
        let (n, d) = store.model_path(&target)?;
        (Some(n), d, store.temp_path("quantize")?)
    };
    let src = ModelFile::open(&src_path)
        .map_err(|e| StoreError::invalid(format!("{}: {e}", src_path.display())))?;
    let mut opts = QuantizeOptions::new(ftype);
    opts.allow_requantize = req.allow_requantize;
    opts.pure = req.pure;
    if let Some(t) = req.threads.filter(|t| *t > 0) {
        opts.threads = t;
    }
    // Refuse before creating anything (requantization not allowed, unsupported types).
    plan(&src.gguf, &opts).map_err(|e| StoreError::invalid(e.to_string()))?;
    let t0 = std::time::Instant::now();
    let mut cleanup = Cleanup::new(tmp.clone());
    let file = std::fs::File::create(&tmp).map_err(|e| write_error(&tmp, &e))?;
    let mut out = BufWriter::with_capacity(4 << 20, file);
    let summary = quantize_model(&src, &mut out, &opts, progress).map_err(|e| match e {
        QuantizeError::Io(io) => write_error(&tmp, &io),
        QuantizeError::Cancelled => StoreError::failed("cancelled"),
        other => StoreError::failed(other.to_string()),
    })?;
    let file = out.into_inner().map_err(|e| write_error(&tmp, e.error()))?;
    file.sync_all().map_err(|e| write_error(&tmp, &e))?;
    drop(file);
    drop(src);
    finish(&tmp, &dest)?;
    cleanup.keep();
    let name = match name {
        Some(n) => Some(store.register(&n, &dest)?),
        None => None,
    };
    Ok(Quantized {
        name,
        path: dest,
        r#type: ftype.name().to_string(),
        bytes_in: summary.bytes_in,
        bytes_out: summary.file_bytes,
        seconds: t0.elapsed().as_secs_f64(),
    })
}
