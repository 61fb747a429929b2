//! Converting a Hugging Face decoder folder into a model of the store (or a `.gguf` path):
//! `weft convert`, the import of a folder, and Ollama `/api/create` with safetensors `files`.

use std::io::BufWriter;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use weft_core::hf::decoder::{convert, ConvertError, ConvertProgress, DecoderConfig};
use weft_core::hf::mmproj::{convert_mmproj, mmproj_type, vision_family};
use weft_core::quantize::{FileType, QuantizeOptions};

use super::{finish, write_error, Cleanup, Store, StoreError};

/// What to convert.
#[derive(Clone, Debug, Deserialize)]
pub struct ConvertRequest {
    /// The Hugging Face folder.
    pub path: PathBuf,
    /// The new model's name (or, from the CLI, an output `.gguf` path); default: the folder
    /// name.
    #[serde(default, alias = "name")]
    pub target: Option<String>,
    /// The output type (`F16` by default, as llama.cpp's converter; any `weft quantize` type).
    #[serde(default, alias = "quantize")]
    pub r#type: Option<String>,
    #[serde(default)]
    pub threads: Option<usize>,
}

/// What a conversion made.
#[derive(Clone, Debug, Serialize)]
pub struct Converted {
    pub name: Option<String>,
    pub path: PathBuf,
    pub r#type: String,
    pub bytes: u64,
    /// The vision projector written beside the model (`mmproj-<file stem>.gguf`) when the
    /// folder is a vision-language model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mmproj: Option<PathBuf>,
    pub seconds: f64,
}

fn looks_like_path(s: &str) -> bool {
    s.contains('/') || s.ends_with(".gguf")
}

/// Checks the request before anything is written: the type, and that the folder's
/// `config.json` names a family the converter knows.
pub fn check_convert(req: &ConvertRequest) -> Result<FileType, StoreError> {
    let ftype: FileType =
        req.r#type.as_deref().unwrap_or("F16").parse().map_err(
            |e: weft_core::quantize::UnknownFileType| StoreError::invalid(e.to_string()),
        )?;
    if !req.path.is_dir() {
        return Err(StoreError::invalid(format!(
            "{} is not a folder",
            req.path.display()
        )));
    }
    DecoderConfig::read(&req.path.join("config.json"))
        .map_err(|e| StoreError::invalid(e.to_string()))?;
    Ok(ftype)
}

/// Converts as `req` says; `paths` lets `target` be a file path (the CLI). `progress`
/// returning false cancels; nothing is left behind on failure.
pub fn convert_in_store(
    store: &Store,
    req: &ConvertRequest,
    paths: bool,
    progress: &mut dyn FnMut(&ConvertProgress) -> bool,
) -> Result<Converted, StoreError> {
    let ftype = check_convert(req)?;
    let folder = req
        .path
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "model".into());
    let target = req.target.clone().unwrap_or_else(|| folder.clone());
    let (name, dest, tmp, scratch) = if paths && looks_like_path(&target) {
        let dest = PathBuf::from(&target);
        let tmp = PathBuf::from(format!("{target}.partial"));
        let scratch = PathBuf::from(format!("{target}.scratch"));
        (None, dest, tmp, scratch)
    } else {
        let (n, d) = store.model_path(&target)?;
        let tmp = store.temp_path("convert")?;
        let scratch = store.temp_path("convert-scratch")?;
        (Some(n), d, tmp, scratch)
    };
    let mut opts = QuantizeOptions::new(ftype);
    if let Some(t) = req.threads.filter(|t| *t > 0) {
        opts.threads = t;
    }
    let t0 = std::time::Instant::now();
    let mut cleanup = Cleanup::new(tmp.clone());
    let file = std::fs::File::create(&tmp).map_err(|e| write_error(&tmp, &e))?;
    let mut out = BufWriter::with_capacity(4 << 20, file);
    let general_name = name.as_deref().unwrap_or(&folder).to_string();
    convert(
        &req.path,
        Some(&general_name),
        &scratch,
        &mut out,
        &opts,
        progress,
    )
    .map_err(|e| match e {
        ConvertError::Cancelled => StoreError::failed("cancelled"),
        ConvertError::Quantize(weft_core::quantize::QuantizeError::Io(io)) => {
            write_error(&tmp, &io)
        }
        ConvertError::Write { path, source } => write_error(Path::new(&path), &source),
        other => StoreError::failed(other.to_string()),
    })?;
    let file = out.into_inner().map_err(|e| write_error(&tmp, e.error()))?;
    file.sync_all().map_err(|e| write_error(&tmp, &e))?;
    drop(file);
    // A vision-language folder also gives its projector, beside the model under the name
    // the registry pairs with it, written before the model so a model never appears alone.
    let mmproj = match vision_family(&req.path) {
        Some(_) => Some(write_mmproj(req, &dest, ftype, &folder)?),
        None => None,
    };
    finish(&tmp, &dest)?;
    cleanup.keep();
    let bytes = dest.metadata().map(|m| m.len()).unwrap_or(0);
    let name = match name {
        Some(n) => Some(store.register(&n, &dest)?),
        None => None,
    };
    Ok(Converted {
        name,
        path: dest,
        r#type: ftype.name().to_string(),
        bytes,
        mmproj,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Writes `mmproj-<stem of dest>.gguf` beside `dest` (F16 for quantized text types, as
/// llama.cpp's converter makes projectors F32, F16 or BF16 only).
fn write_mmproj(
    req: &ConvertRequest,
    dest: &Path,
    ftype: FileType,
    folder: &str,
) -> Result<PathBuf, StoreError> {
    let stem = dest
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    let path = dest.with_file_name(format!("mmproj-{stem}.gguf"));
    let tmp = path.with_file_name(format!("mmproj-{stem}.gguf.partial"));
    let mut cleanup = Cleanup::new(tmp.clone());
    let file = std::fs::File::create(&tmp).map_err(|e| write_error(&tmp, &e))?;
    let mut out = BufWriter::with_capacity(4 << 20, file);
    let name = weft_core::hf::mmproj::id_to_title(folder);
    convert_mmproj(&req.path, Some(&name), &mut out, mmproj_type(ftype)).map_err(|e| match e {
        ConvertError::Write { source, .. } => write_error(&tmp, &source),
        other => StoreError::failed(format!("mmproj: {other}")),
    })?;
    let file = out.into_inner().map_err(|e| write_error(&tmp, e.error()))?;
    file.sync_all().map_err(|e| write_error(&tmp, &e))?;
    drop(file);
    finish(&tmp, &path)?;
    cleanup.keep();
    Ok(path)
}
