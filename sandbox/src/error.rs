//! The sandbox's own error type.
//!
//! Errors say what failed and what to do. [`Error::is_caller_fault`] separates bad input (a path
//! outside the workspace, a malformed zip, an unknown tool) from failures of the host, so a server
//! can map the first to a 4xx and the second to a 5xx.

use std::path::PathBuf;

/// Everything the sandbox, its file tools, skills and artifacts can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A guest runtime (`python.wasm`, `quickjs.wasm`) is not installed.
    #[error("{} is missing; run scripts/fetch-sandbox.sh (or set WEFT_SANDBOX_DIR)", path.display())]
    RuntimeMissing { path: PathBuf },
    /// A guest runtime is present but is not the pinned build.
    #[error("{} has sha256 {found}, expected {expected}; run scripts/fetch-sandbox.sh again", path.display())]
    RuntimeMismatch {
        path: PathBuf,
        found: String,
        expected: String,
    },
    /// wasmtime could not compile, load or link a module.
    #[error("wasmtime: {0}")]
    Wasmtime(String),
    /// A host I/O operation failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A path given by the guest, the model or a user is not allowed.
    #[error("path {path:?}: {reason}")]
    Path { path: String, reason: &'static str },
    /// A file is larger than the host reads whole (a guest can make a file of any logical
    /// length; the host never loads such a file).
    #[error("{path:?} is larger than {limit} bytes, the most this tool reads whole")]
    TooLarge { path: String, limit: u64 },
    /// A file the caller named does not exist in the workspace or skill.
    #[error("{0:?} does not exist")]
    NotFound(String),
    /// An `edit_file` / `apply_patch` request does not match the file.
    #[error("{0}")]
    Edit(String),
    /// A tool call names no known tool, or its arguments do not match its schema.
    #[error("tool call: {0}")]
    ToolCall(String),
    /// A limit given by the caller is out of range.
    #[error("invalid limit: {0}")]
    Limit(String),
    /// A skill zip was refused (nothing was written).
    #[error("skill archive refused: {0}")]
    SkillArchive(String),
    /// A skill folder or its `SKILL.md` is malformed.
    #[error("skill {name:?}: {message}")]
    Skill { name: String, message: String },
    /// An installed skill of that name exists and overwrite was not asked for.
    #[error("skill {0:?} is already installed (pass overwrite to replace it)")]
    SkillExists(String),
    /// Only installed skills can be deleted.
    #[error("skill {0:?} was discovered in a configured directory, not installed; it cannot be deleted here")]
    SkillNotDeletable(String),
    /// The model-turn callback of a tool loop failed.
    #[error("model turn: {0}")]
    Model(String),
}

impl Error {
    /// An I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    /// A refused path.
    pub fn path(path: impl Into<String>, reason: &'static str) -> Self {
        Error::Path {
            path: path.into(),
            reason,
        }
    }

    /// True when the error is the caller's (bad path, bad archive, unknown tool, limits out of
    /// range, missing file), false when the host failed (I/O, wasmtime, missing runtime).
    pub fn is_caller_fault(&self) -> bool {
        !matches!(
            self,
            Error::RuntimeMissing { .. }
                | Error::RuntimeMismatch { .. }
                | Error::Wasmtime(_)
                | Error::Io { .. }
                | Error::Model(_)
        )
    }

    /// True for "no such thing" errors (a server maps these to 404).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound(_))
    }
}

impl From<wasmtime::Error> for Error {
    fn from(e: wasmtime::Error) -> Self {
        Error::Wasmtime(format!("{e:#}"))
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
