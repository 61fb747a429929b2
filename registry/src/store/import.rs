//! Importing a local model into the store: a GGUF file is hard-linked (or copied, across file
//! systems) under its new name; a Hugging Face folder is converted (`convert.rs`). Only paths
//! inside the
//! allowed import roots are read — the real path, after following every symlink, so neither
//! `..` nor a link pointing out of a root gets past the check.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::convert::{convert_in_store, ConvertRequest};
use super::{check_gguf, finish, write_error, Cleanup, Store, StoreError};
use crate::registry::names;

/// What to import.
#[derive(Clone, Debug, Deserialize)]
pub struct ImportRequest {
    /// A `.gguf` file, or a Hugging Face folder (converted to F16).
    pub path: PathBuf,
    /// The name to store it under (default: the file or folder name).
    #[serde(default)]
    pub name: Option<String>,
}

/// What an import made.
#[derive(Clone, Debug, Serialize)]
pub struct Imported {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
    /// `linked`, `copied` or `converted` (a Hugging Face folder).
    pub how: &'static str,
}

/// The real path of `p`, refused unless it lies inside one of `roots` (when given).
pub fn checked_path(p: &Path, roots: Option<&[PathBuf]>) -> Result<PathBuf, StoreError> {
    let real = p
        .canonicalize()
        .map_err(|e| StoreError::invalid(format!("cannot import {}: {e}", p.display())))?;
    if let Some(roots) = roots {
        if !roots.iter().any(|r| real.starts_with(r)) {
            let list: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
            return Err(StoreError::invalid(format!(
                "{} is outside the allowed import roots ({}); the server's --import-root adds one",
                p.display(),
                list.join(", ")
            )));
        }
    }
    Ok(real)
}

/// Copies `src` to `dst` in 1 MiB pieces, reporting bytes copied (returning false cancels).
pub fn copy_with_progress(
    src: &Path,
    dst: &Path,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<u64, StoreError> {
    let mut from = File::open(src)
        .map_err(|e| StoreError::failed(format!("cannot read {}: {e}", src.display())))?;
    let total = from.metadata().map(|m| m.len()).unwrap_or(0);
    let mut to = File::create(dst).map_err(|e| write_error(dst, &e))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0u64;
    loop {
        let n = from
            .read(&mut buf)
            .map_err(|e| StoreError::failed(format!("cannot read {}: {e}", src.display())))?;
        if n == 0 {
            break;
        }
        to.write_all(&buf[..n]).map_err(|e| write_error(dst, &e))?;
        done += n as u64;
        if !progress(done, total) {
            return Err(StoreError::failed("cancelled"));
        }
    }
    to.sync_all().map_err(|e| write_error(dst, &e))?;
    Ok(done)
}

/// Imports `req.path`. With `roots` it must lie inside one of them (the server passes the
/// store's import roots; the CLI, run by the machine's own user, passes none).
pub fn import(
    store: &Store,
    req: &ImportRequest,
    roots: Option<&[PathBuf]>,
    progress: &mut dyn FnMut(&str, u64, u64) -> bool,
) -> Result<Imported, StoreError> {
    let real = checked_path(&req.path, roots)?;
    if real.is_dir() {
        // A Hugging Face folder: converted to F16 (as llama.cpp's converter does by default).
        let conv = ConvertRequest {
            path: real,
            target: req.name.clone(),
            r#type: None,
            threads: None,
        };
        let got = convert_in_store(store, &conv, false, &mut |p| {
            progress(p.phase, p.done, p.total)
        })?;
        return Ok(Imported {
            name: got.name.unwrap_or_default(),
            path: got.path,
            bytes: got.bytes,
            how: "converted",
        });
    }
    check_gguf(&real, &real.display().to_string()).map_err(|e| StoreError::invalid(e.message))?;
    let default = names::from_file(&real);
    let (name, dest) = store.model_path(req.name.as_deref().unwrap_or(&default))?;
    let bytes = real.metadata().map(|m| m.len()).unwrap_or(0);
    if dest == real {
        let name = store.register(&name, &dest)?;
        return Ok(Imported {
            name,
            path: dest,
            bytes,
            how: "linked",
        });
    }
    let tmp = store.temp_path("import")?;
    let mut cleanup = Cleanup::new(tmp.clone());
    let how = if std::fs::hard_link(&real, &tmp).is_ok() {
        progress("linking", bytes, bytes);
        "linked"
    } else {
        copy_with_progress(&real, &tmp, &mut |d, t| progress("copying", d, t))?;
        "copied"
    };
    finish(&tmp, &dest)?;
    cleanup.keep();
    let name = store.register(&name, &dest)?;
    Ok(Imported {
        name,
        path: dest,
        bytes,
        how,
    })
}
