//! Compile a runtime module once and keep the machine code on disk (`.cwasm`).
//!
//! Compiling `python.wasm` takes tens of seconds; loading the serialized result takes
//! milliseconds. The file name carries the module's sha256, the wasmtime version and a hash of
//! the engine settings that affect code generation, so a change of any of them compiles afresh
//! instead of loading stale code. Files are written to a temporary name and renamed, so
//! concurrent processes never see half a file.
//!
//! Compiled code is run as is, so it is trusted only when it checks out: the directory is made
//! private (0700), and each `.cwasm` has its sha256 written beside it (`.cwasm.sha256`) when
//! compiled; a file whose bytes do not hash to that is compiled again, never deserialized.

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

/// The file holding the sha256 of a `.cwasm`, written beside it when it is compiled.
fn hash_file(cwasm: &Path) -> PathBuf {
    let mut name = cwasm.as_os_str().to_owned();
    name.push(".sha256");
    PathBuf::from(name)
}

/// Makes `dir` (and its parents) and restricts it to its owner (0700): compiled code is run
/// as is, so no other user may put a file there. False when that fails (the caller then
/// compiles without the cache).
fn private_dir(dir: &Path) -> bool {
    if std::fs::create_dir_all(dir).is_err() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).is_err() {
            return false;
        }
    }
    true
}

/// The cached code at `path` when its bytes hash to what was recorded when it was compiled;
/// None (and both files removed) otherwise. The bytes are hashed and then deserialized from
/// the same buffer, so nothing can change between the check and the load.
fn checked(engine: &Engine, path: &Path) -> Option<Module> {
    let want = std::fs::read_to_string(hash_file(path)).ok()?;
    let bytes = std::fs::read(path).ok()?;
    if crate::runtimes::sha256_hex(&bytes) != want.trim() {
        return None;
    }
    // SAFETY: the bytes are the ones this crate serialized into the user's private (0700)
    // cache directory, as their recorded sha256 shows; wasmtime also checks their header and
    // engine compatibility and errors out instead of running mismatched code.
    unsafe { Module::deserialize(engine, &bytes) }.ok()
}

/// Writes `bytes` to `path` through a temporary file and a rename, so concurrent processes
/// never see half a file.
fn save(dir: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Error::io(format!("creating a file in {}", dir.display()), e))?;
    std::fs::write(tmp.path(), bytes)
        .map_err(|e| Error::io(format!("writing {}", tmp.path().display()), e))?;
    tmp.persist(path)
        .map_err(|e| Error::io(format!("saving {}", path.display()), e.error))?;
    Ok(())
}

/// Whether `load` would find compiled code for the pinned module `name` in `dir` (a hint for
/// a progress line; the code is still checked when loaded).
pub(crate) fn is_cached(engine: &Engine, dir: Option<&Path>, name: &str, sha256: &str) -> bool {
    dir.is_some_and(|d| {
        let path = cache_file(engine, d, name, sha256);
        path.is_file() && hash_file(&path).is_file()
    })
}

/// Loads `bytes` (whose sha256 is given) from the cache in `dir`, or compiles and caches it.
/// Cached code is used only when its own sha256 matches the one written beside it when it was
/// compiled; otherwise it is compiled again and replaced.
pub(crate) fn load(
    engine: &Engine,
    dir: Option<&Path>,
    name: &str,
    bytes: &[u8],
    sha256: &str,
) -> Result<Loaded> {
    let t0 = Instant::now();
    let dir = dir.filter(|d| private_dir(d));
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
        if let Some(module) = checked(engine, &path) {
            return Ok(Loaded {
                module,
                origin: Origin::Cached,
                took: t0.elapsed(),
            });
        }
        // Stale, damaged or altered: compile again and replace it.
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(hash_file(&path));
    }
    let module = Module::new(engine, bytes)?;
    let serialized = module.serialize()?;
    // The code first, then its hash: a crash between the two leaves code without a hash,
    // which is never loaded.
    save(dir, &path, &serialized)?;
    save(
        dir,
        &hash_file(&path),
        crate::runtimes::sha256_hex(&serialized).as_bytes(),
    )?;
    Ok(Loaded {
        module,
        origin: Origin::Compiled,
        took: t0.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny module (wasm binary of `(module (func (export "f")))`).
    const WASM: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01, 0x60, 0x00, 0x00, 0x03,
        0x02, 0x01, 0x00, 0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00, 0x0a, 0x04, 0x01, 0x02, 0x00,
        0x0b,
    ];

    fn engine() -> Engine {
        Engine::new(&wasmtime::Config::new()).unwrap()
    }

    fn sha() -> String {
        crate::runtimes::sha256_hex(WASM)
    }

    #[test]
    fn compiled_code_is_saved_with_its_hash_and_loaded_back() {
        let e = engine();
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("compiled");
        let first = load(&e, Some(&dir), "t.wasm", WASM, &sha()).unwrap();
        assert_eq!(first.origin, Origin::Compiled);
        let path = cache_file(&e, &dir, "t.wasm", &sha());
        let recorded = std::fs::read_to_string(hash_file(&path)).unwrap();
        assert_eq!(
            recorded,
            crate::runtimes::sha256_hex(&std::fs::read(&path).unwrap())
        );
        assert!(is_cached(&e, Some(&dir), "t.wasm", &sha()));
        let again = load(&e, Some(&dir), "t.wasm", WASM, &sha()).unwrap();
        assert_eq!(again.origin, Origin::Cached);
        assert!(again.module.get_export("f").is_some());
    }

    #[cfg(unix)]
    #[test]
    fn the_cache_directory_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let e = engine();
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("compiled");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        load(&e, Some(&dir), "t.wasm", WASM, &sha()).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn altered_code_is_compiled_again_not_deserialized() {
        let e = engine();
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("compiled");
        load(&e, Some(&dir), "t.wasm", WASM, &sha()).unwrap();
        let path = cache_file(&e, &dir, "t.wasm", &sha());
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let l = load(&e, Some(&dir), "t.wasm", WASM, &sha()).unwrap();
        assert_eq!(l.origin, Origin::Compiled);
        // Replaced by a good copy with a matching hash.
        assert_eq!(
            load(&e, Some(&dir), "t.wasm", WASM, &sha()).unwrap().origin,
            Origin::Cached
        );
    }

    #[test]
    fn code_without_a_recorded_hash_is_not_loaded() {
        let e = engine();
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("compiled");
        load(&e, Some(&dir), "t.wasm", WASM, &sha()).unwrap();
        let path = cache_file(&e, &dir, "t.wasm", &sha());
        std::fs::remove_file(hash_file(&path)).unwrap();
        assert!(!is_cached(&e, Some(&dir), "t.wasm", &sha()));
        let l = load(&e, Some(&dir), "t.wasm", WASM, &sha()).unwrap();
        assert_eq!(l.origin, Origin::Compiled);
    }
}
