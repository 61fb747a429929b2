//! The model store: the folder of GGUF files the registry serves (`$WEFT_HOME/models`,
//! `WEFT_HOME` defaulting to `~/.weft`, unless `--models-dir` says otherwise), and the ways
//! models get into it: [`pull`] (download, resumed and verified), [`import`] (a local file) and
//! [`quantize_in_store`]. Converting Hugging Face folders plugs in beside `import` (see
//! `import.rs`).
//!
//! Every way in writes to a temporary file under `.weft-partial/` in the store and renames it
//! into place only once it is complete and checked, so a failure or a cancel never leaves a
//! half-written model where the registry looks (`*.gguf` directly in the folder).
//!
//! Files: `pull.rs` (HTTP download), `reference.rs` (what a pull reference means),
//! `import.rs`, `quantize.rs`.

mod convert;
mod import;
mod pull;
pub mod pull_policy;
mod quantize;
mod reference;

use std::path::{Path, PathBuf};

pub use convert::{check_convert, convert_in_store, ConvertRequest, Converted};
pub use import::{checked_path, import, ImportRequest, Imported};
pub use pull::{pull, PullProgress, PullRequest, Pulled};
pub use pull_policy::PullPolicy;
pub use quantize::{quantize_in_store, QuantizeRequest, Quantized};
pub use reference::{resolve_reference, Resolved, DEFAULT_HF_ENDPOINT};

use crate::registry::{names, Catalog};

/// Folder (inside the store) for files being written.
pub const PARTIAL_DIR: &str = ".weft-partial";

/// Makes a name reach a finished file: the running server's registry when there is one (so
/// its catalog stays the only writer of the names file), else the store's own catalog.
pub type Registrar =
    std::sync::Arc<dyn Fn(&str, &Path) -> Result<String, StoreError> + Send + Sync>;

/// Settings of a store.
#[derive(Clone)]
pub struct Store {
    /// The models folder.
    pub dir: PathBuf,
    /// Base URL `hf.co/...` references resolve against.
    pub hf_endpoint: String,
    /// Folders `import` may read from (canonical paths). Always includes `dir`.
    pub import_roots: Vec<PathBuf>,
    /// Where pulls may connect and redirect (strict unless the operator allows more).
    pub pull_policy: PullPolicy,
    registrar: Option<Registrar>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .field("hf_endpoint", &self.hf_endpoint)
            .field("import_roots", &self.import_roots)
            .finish()
    }
}

/// Why a store operation failed: a message fit for a user, and whether the request was at
/// fault (a 4xx) or the machine (disk, network: a failed job).
#[derive(Debug, Clone)]
pub struct StoreError {
    pub message: String,
    pub client_fault: bool,
}

impl StoreError {
    /// The request was wrong (bad name, path outside the roots, unknown type ...).
    pub fn invalid(m: impl Into<String>) -> Self {
        StoreError {
            message: m.into(),
            client_fault: true,
        }
    }

    /// The work failed (network, disk, a bad download).
    pub fn failed(m: impl Into<String>) -> Self {
        StoreError {
            message: m.into(),
            client_fault: false,
        }
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {}

/// `$WEFT_HOME`, or `~/.weft`.
pub fn weft_home() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("WEFT_HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(h));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".weft"))
}

/// `$WEFT_HOME/models`, or `~/.weft/models`.
pub fn default_dir() -> Option<PathBuf> {
    weft_home().map(|h| h.join("models"))
}

impl Store {
    /// The store at `dir` (or the default one), created if missing.
    pub fn open(dir: Option<&Path>) -> Result<Store, StoreError> {
        let dir = match dir {
            Some(d) => d.to_path_buf(),
            None => default_dir().ok_or_else(|| {
                StoreError::invalid("no models folder: set WEFT_HOME or HOME, or pass --models-dir")
            })?,
        };
        std::fs::create_dir_all(&dir).map_err(|e| {
            StoreError::failed(format!(
                "cannot create the models folder {}: {e}",
                dir.display()
            ))
        })?;
        let canon = dir.canonicalize().map_err(|e| {
            StoreError::failed(format!(
                "cannot open the models folder {}: {e}",
                dir.display()
            ))
        })?;
        Ok(Store {
            dir: canon.clone(),
            hf_endpoint: DEFAULT_HF_ENDPOINT.to_string(),
            import_roots: vec![canon],
            pull_policy: PullPolicy::strict(),
            registrar: None,
        })
    }

    /// Registers finished models through `r` instead of the store's names file.
    pub fn with_registrar(mut self, r: Registrar) -> Self {
        self.registrar = Some(r);
        self
    }

    /// Pulls obey `policy`.
    pub fn with_pull_policy(mut self, policy: PullPolicy) -> Self {
        self.pull_policy = policy;
        self
    }

    /// Uses `endpoint` for `hf.co/...` references.
    pub fn with_hf_endpoint(mut self, endpoint: &str) -> Self {
        self.hf_endpoint = endpoint.trim_end_matches('/').to_string();
        self
    }

    /// Also allows imports from `roots` (each must exist).
    pub fn with_import_roots(mut self, roots: &[PathBuf]) -> Result<Self, StoreError> {
        for r in roots {
            let c = r.canonicalize().map_err(|e| {
                StoreError::invalid(format!("import root {} cannot be used: {e}", r.display()))
            })?;
            self.import_roots.push(c);
        }
        Ok(self)
    }

    /// The catalog of names in this store (files and names clients made).
    pub fn catalog(&self) -> Result<Catalog, StoreError> {
        Catalog::new(&[], Some(&self.dir)).map_err(|e| StoreError::failed(format!("{e:#}")))
    }

    /// Where a model called `name` lives: `<dir>/<name>.gguf`. The name must be valid (see
    /// [`names::check_new`]); a `:tag` becomes `-tag` in the file name.
    pub fn model_path(&self, name: &str) -> Result<(String, PathBuf), StoreError> {
        let name = names::check_new(name).map_err(|e| StoreError::invalid(e.to_string()))?;
        let file = format!("{}.gguf", name.replace(':', "-"));
        Ok((name, self.dir.join(file)))
    }

    /// The partial-files folder, created if missing.
    pub fn partial_dir(&self) -> Result<PathBuf, StoreError> {
        let d = self.dir.join(PARTIAL_DIR);
        std::fs::create_dir_all(&d)
            .map_err(|e| StoreError::failed(format!("cannot create {}: {e}", d.display())))?;
        Ok(d)
    }

    /// A fresh temporary path in the partial folder (unique in this process).
    pub fn temp_path(&self, what: &str) -> Result<PathBuf, StoreError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        Ok(self
            .partial_dir()?
            .join(format!("{what}-{}-{n}.tmp", std::process::id())))
    }
}

impl Store {
    /// Makes `name` reach the model file `path` (already in the store): the file's own name
    /// does when it is the same, otherwise an alias is saved in the store's names file.
    pub fn register(&self, name: &str, path: &Path) -> Result<String, StoreError> {
        if let Some(r) = &self.registrar {
            return r(name, path);
        }
        let stem = names::from_file(path);
        if stem == name {
            return Ok(stem);
        }
        let mut c = self.catalog()?;
        c.alias(name, &stem)
            .map_err(|e| StoreError::failed(format!("cannot name the model {name:?}: {}", e)))
    }
}

/// Moves a finished temporary file to its place in the store (same file system: atomic).
pub fn finish(tmp: &Path, dest: &Path) -> Result<(), StoreError> {
    std::fs::rename(tmp, dest).map_err(|e| {
        let _ = std::fs::remove_file(tmp);
        StoreError::failed(format!(
            "cannot move the model into {}: {e}",
            dest.display()
        ))
    })
}

/// Removes a file when dropped unless [`Cleanup::keep`] was called: partial files go away on
/// every error path.
pub struct Cleanup(Option<PathBuf>);

impl Cleanup {
    pub fn new(path: PathBuf) -> Self {
        Cleanup(Some(path))
    }

    /// Keeps the file (it was moved into place).
    pub fn keep(&mut self) {
        self.0 = None;
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Checks that a finished file is a GGUF the registry can read; the error names the file.
pub fn check_gguf(path: &Path, what: &str) -> Result<(), StoreError> {
    weft_core::gguf::ModelFile::open(path)
        .map(drop)
        .map_err(|e| StoreError::failed(format!("{what} is not a usable GGUF file: {e}")))
}

/// A message for an I/O error while writing into the store (names a full disk plainly).
pub fn write_error(path: &Path, e: &std::io::Error) -> StoreError {
    let why = if e.raw_os_error() == Some(28) {
        "no space left on the device".to_string()
    } else {
        e.to_string()
    };
    StoreError::failed(format!("cannot write {}: {why}", path.display()))
}
