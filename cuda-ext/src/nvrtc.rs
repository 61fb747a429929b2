//! Compiling kernel sources to PTX with NVRTC at run time, cached per device architecture.
//!
//! NVRTC is `libnvrtc.so.12`, loaded by cudarc on first use. Where it is not on the loader's
//! path (e.g. the `nvidia-cuda-nvrtc-cu12` wheel in a Python site-packages), set
//! `WEFT_NVRTC_PATH` to the library file or its folder: [`load`] opens it by full path first, and
//! cudarc's later `dlopen("libnvrtc.so.12")` then finds the already-loaded library by its soname
//! (glibc matches loaded objects by soname before searching the path).
//!
//! PTX is cached in memory and on disk under `$WEFT_CUDA_CACHE` (default
//! `~/.cache/weft/cuda`), keyed by architecture, NVRTC version and a hash of the source and
//! options, so a second start does not recompile.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use cudarc::nvrtc::{result, sys};

/// The environment variable naming NVRTC's library file or folder.
pub const NVRTC_PATH_VAR: &str = "WEFT_NVRTC_PATH";

/// The one line printed when NVRTC cannot be found.
pub const NO_NVRTC: &str = "NVRTC (libnvrtc.so.12) not found; install the CUDA 12 toolkit's NVRTC or `pip install nvidia-cuda-nvrtc-cu12` and set WEFT_NVRTC_PATH to its lib folder";

/// Library file names tried inside a folder named by `WEFT_NVRTC_PATH`.
const LIB_NAMES: [&str; 2] = ["libnvrtc.so.12", "libnvrtc.so"];

/// The candidate library files for a `WEFT_NVRTC_PATH` value (a file, or a folder to look in).
pub fn candidates(value: &Path) -> Vec<PathBuf> {
    if value.is_dir() {
        LIB_NAMES.iter().map(|n| value.join(n)).collect()
    } else {
        vec![value.to_path_buf()]
    }
}

/// Loads NVRTC once: Ok((major, minor)) of its version, or [`NO_NVRTC`] (never panics).
pub fn load() -> Result<(i32, i32), String> {
    static LOADED: OnceLock<Result<(i32, i32), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            if let Some(v) = std::env::var_os(NVRTC_PATH_VAR) {
                for c in candidates(Path::new(&v)) {
                    // SAFETY: loading NVRTC runs only its initialisers. The handle is leaked on
                    // purpose: the library must stay loaded for cudarc's own handle to find it.
                    if let Ok(lib) = unsafe { libloading::Library::new(&c) } {
                        std::mem::forget(lib);
                        break;
                    }
                }
            }
            // SAFETY: only tries dlopen on cudarc's candidate names.
            if !unsafe { sys::is_culib_present() } {
                return Err(NO_NVRTC.to_string());
            }
            let (mut major, mut minor) = (0, 0);
            // SAFETY: plain out-parameters; the library is present (checked above).
            unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
                .result()
                .map_err(|e| format!("NVRTC does not answer its version ({e:?})"))?;
            Ok((major, minor))
        })
        .clone()
}

/// FNV-1a, 64 bits: a hash that stays the same across Rust versions (the on-disk cache key).
pub fn stable_hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0xff]) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// NVRTC options for `arch` (`sm_80` → PTX for `compute_80`, which the driver JITs for the
/// device and any newer one).
pub fn options(arch: &str) -> Vec<String> {
    let virt = arch.replacen("sm_", "compute_", 1);
    vec![
        format!("--gpu-architecture={virt}"),
        "--std=c++17".into(),
        // Kernels follow the CPU backend's arithmetic: no flush-to-zero, IEEE division and
        // square roots, no contraction the CPU does not do either.
        "--ftz=false".into(),
        "--prec-div=true".into(),
        "--prec-sqrt=true".into(),
        "--fmad=false".into(),
        "--device-as-default-execution-space".into(),
    ]
}

/// A compile failure: NVRTC's log (the file and line of each error).
#[derive(Debug, Clone)]
pub struct CompileError {
    pub name: String,
    pub arch: String,
    pub log: String,
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NVRTC failed on {} for {}:\n{}",
            self.name, self.arch, self.log
        )
    }
}

/// Compiles one source to PTX for `arch` (no caching). NVRTC must be [`load`]ed.
pub fn compile(name: &str, source: &str, arch: &str) -> Result<String, CompileError> {
    let fail = |log: String| CompileError {
        name: name.into(),
        arch: arch.into(),
        log,
    };
    let src = std::ffi::CString::new(source).map_err(|_| fail("NUL byte in source".into()))?;
    let cname = std::ffi::CString::new(name).map_err(|_| fail("NUL byte in name".into()))?;
    let prog = result::create_program(&src, Some(&cname)).map_err(|e| fail(format!("{e:?}")))?;
    // SAFETY: `prog` was just created and is destroyed once, below.
    unsafe {
        let r = result::compile_program(prog, &options(arch));
        let out = match r {
            Ok(()) => result::get_ptx(prog)
                .map(|p| c_chars_to_string(&p))
                .map_err(|e| fail(format!("{e:?}"))),
            Err(e) => {
                let log = result::get_program_log(prog)
                    .map(|l| c_chars_to_string(&l))
                    .unwrap_or_default();
                Err(fail(format!("{e:?}\n{log}")))
            }
        };
        let _ = result::destroy_program(prog);
        out
    }
}

fn c_chars_to_string(v: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = v.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The on-disk cache folder.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("WEFT_CUDA_CACHE") {
        return Some(PathBuf::from(d));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/weft/cuda"))
}

/// Compiled PTX for (arch, source), from memory, then disk, then NVRTC.
pub fn compile_cached(name: &str, source: &str, arch: &str) -> Result<String, String> {
    static MEM: OnceLock<Mutex<HashMap<u64, String>>> = OnceLock::new();
    let (major, minor) = load()?;
    let ver = format!("{major}.{minor}");
    let opts = options(arch).join(" ");
    let key = stable_hash(&[arch, &ver, &opts, source]);
    let mem = MEM.get_or_init(Default::default);
    if let Some(p) = mem.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(p.clone());
    }
    let file = cache_dir().map(|d| d.join(format!("{name}-{arch}-{key:016x}.ptx")));
    let ptx = match file.as_ref().and_then(|f| std::fs::read_to_string(f).ok()) {
        Some(p) => p,
        None => {
            let p = compile(name, source, arch).map_err(|e| e.to_string())?;
            if let Some(f) = &file {
                // A cache that cannot be written only costs a recompile next time.
                let _ = f.parent().map(std::fs::create_dir_all);
                let _ = std::fs::write(f, &p);
            }
            p
        }
    };
    mem.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, ptx.clone());
    Ok(ptx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_and_separates_parts() {
        assert_eq!(stable_hash(&["a"]), stable_hash(&["a"]));
        assert_ne!(stable_hash(&["ab", "c"]), stable_hash(&["a", "bc"]));
    }

    #[test]
    fn options_name_the_virtual_architecture() {
        let o = options("sm_90");
        assert_eq!(o[0], "--gpu-architecture=compute_90");
        assert!(o.contains(&"--fmad=false".to_string()));
    }

    #[test]
    fn a_folder_value_lists_the_library_names() {
        let d = std::env::temp_dir();
        let c = candidates(&d);
        assert_eq!(c[0], d.join("libnvrtc.so.12"));
        assert_eq!(candidates(Path::new("/x/libnvrtc.so.12.9")).len(), 1);
    }
}
