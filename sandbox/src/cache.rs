//! Compile a runtime module once and keep the machine code on disk (`.cwasm`).
//!
//! Compiling `python.wasm` takes tens of seconds; loading the serialized result takes
//! milliseconds. The file name carries the module's sha256, the wasmtime version and a hash of
//! the engine settings that affect code generation, so a change of any of them compiles afresh
//! instead of loading stale code. Files are written to a temporary name and renamed, so
//! concurrent processes never see half a file.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wasmtime::{Engine, Module};

use crate::error::{Error, Result};

/// The wasmtime version this crate is pinned to (see Cargo.toml).
pub const WASMTIME_VERSION: &str = "48.0.8";

/// How a module was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Compiled now (and saved, when a cache directory was given).
    Compiled,
    /// Loaded from the `.cwasm` cache.
    Cached,
}

/// A loaded module and how long it took.
pub(crate) struct Loaded {
    pub(crate) module: Module,
    pub(crate) origin: Origin,
    pub(crate) took: Duration,
}

fn cache_file(engine: &Engine, dir: &Path, name: &str, sha256: &str) -> PathBuf {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    let stem = name.trim_end_matches(".wasm");
    dir.join(format!(
        "{stem}-{}-wasmtime{WASMTIME_VERSION}-{:016x}.cwasm",
        &sha256[..16],
        h.finish()
    ))
}

/// Loads `bytes` (whose sha256 is given) from the cache in `dir`, or compiles and caches it.
pub(crate) fn load(
    engine: &Engine,
    dir: Option<&Path>,
    name: &str,
    bytes: &[u8],
    sha256: &str,
) -> Result<Loaded> {
    let t0 = Instant::now();
    let Some(dir) = dir else {
        let module = Module::new(engine, bytes)?;
        return Ok(Loaded {
            module,
            origin: Origin::Compiled,
            took: t0.elapsed(),
        });
    };
    let path = cache_file(engine, dir, name, sha256);
    if path.is_file() {
        // SAFETY: the file is one this crate serialized into the user's own cache directory
        // (named by module hash and engine settings); wasmtime checks its header and engine
        // compatibility and errors out instead of running mismatched code.
        match unsafe { Module::deserialize_file(engine, &path) } {
            Ok(module) => {
                return Ok(Loaded {
                    module,
                    origin: Origin::Cached,
                    took: t0.elapsed(),
                });
            }
            Err(_) => {
                // Stale or damaged: compile again and replace it.
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let module = Module::new(engine, bytes)?;
    let serialized = module.serialize()?;
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Error::io(format!("creating a file in {}", dir.display()), e))?;
    std::fs::write(tmp.path(), &serialized)
        .map_err(|e| Error::io(format!("writing {}", tmp.path().display()), e))?;
    tmp.persist(&path)
        .map_err(|e| Error::io(format!("saving {}", path.display()), e.error))?;
    Ok(Loaded {
        module,
        origin: Origin::Compiled,
        took: t0.elapsed(),
    })
}
