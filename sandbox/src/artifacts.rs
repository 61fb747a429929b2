//! Artifacts: copies of the files a run wrote, kept for download under a random run id
//! (`/api/code/artifacts/{runId}/{path}`) until they expire.
//!
//! Files are copied out of the workspace (so the workspace can be deleted with its request),
//! paths are checked like every workspace path, and the content type is sniffed from the bytes.
//! Markup that a browser would run (HTML, SVG, XML) is served as plain text; a server should
//! also send `Content-Disposition: attachment` and `X-Content-Type-Options: nosniff`.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::workspace::{paths, FileInfo, Workspace};

/// Files saved per run at most.
const MAX_FILES: usize = 256;

/// A saved file, as listed in a chat-UI frame (`{name, bytes, url}`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ArtifactFile {
    /// Path inside the run, `/`-separated.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Download URL.
    pub url: String,
}

/// One saved run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ArtifactRun {
    /// The run id (32 hex digits).
    pub run_id: String,
    /// Its files.
    pub files: Vec<ArtifactFile>,
}

/// A file opened for download.
#[derive(Clone, Debug)]
pub struct Artifact {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// The sniffed content type.
    pub content_type: &'static str,
    /// The file's name (last path component), for `Content-Disposition`.
    pub file_name: String,
}

/// Where artifacts are kept.
#[derive(Clone, Debug)]
pub struct ArtifactStore {
    root: PathBuf,
    ttl: Duration,
    url_prefix: String,
    max_bytes: u64,
}

impl ArtifactStore {
    /// A store in `root`, keeping runs for `ttl`, with URLs under `/api/code/artifacts`.
    pub fn new(root: impl Into<PathBuf>, ttl: Duration) -> Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root)
            .map_err(|e| Error::io(format!("creating {}", root.display()), e))?;
        Ok(ArtifactStore {
            root,
            ttl,
            url_prefix: "/api/code/artifacts".into(),
            max_bytes: 256 << 20,
        })
    }

    /// The same store with another URL prefix.
    pub fn with_url_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.url_prefix = prefix.into().trim_end_matches('/').to_string();
        self
    }

    /// The same store with another cap on the bytes saved per run.
    pub fn with_max_bytes(mut self, max: u64) -> Self {
        self.max_bytes = max;
        self
    }

    /// Copies `files` out of `workspace` under a new run id. Files that vanished or lead out of
    /// the workspace are skipped; past the per-run cap the rest are skipped too.
    pub fn save(&self, workspace: &Workspace, files: &[FileInfo]) -> Result<ArtifactRun> {
        self.sweep();
        let run_id = new_run_id()?;
        let dir = self.root.join(&run_id);
        std::fs::create_dir(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let mut saved = Vec::new();
        let mut total = 0u64;
        for f in files.iter().take(MAX_FILES) {
            let Ok(rel) = paths::relative(&f.path, false) else {
                continue;
            };
            let Ok(bytes) = workspace.read(&f.path) else {
                continue;
            };
            if total + bytes.len() as u64 > self.max_bytes {
                break;
            }
            total += bytes.len() as u64;
            let out = dir.join(&rel);
            if let Some(parent) = out.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
            }
            std::fs::write(&out, &bytes)
                .map_err(|e| Error::io(format!("writing {}", out.display()), e))?;
            let name = paths::display(&rel);
            saved.push(ArtifactFile {
                url: format!("{}/{run_id}/{name}", self.url_prefix),
                bytes: bytes.len() as u64,
                name,
            });
        }
        Ok(ArtifactRun {
            run_id,
            files: saved,
        })
    }

    /// Opens a saved file. Unknown or expired runs, traversal and missing files are errors
    /// (`NotFound` for the first and last, `Path` for traversal).
    pub fn open(&self, run_id: &str, path: &str) -> Result<Artifact> {
        if !is_run_id(run_id) {
            return Err(Error::NotFound(format!("artifact run {run_id}")));
        }
        let rel = paths::relative(path, false)?;
        let dir = self.root.join(run_id);
        if self.expired(&dir) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(Error::NotFound(format!("artifact run {run_id}")));
        }
        let d = cap_std::fs::Dir::open_ambient_dir(&dir, cap_std::ambient_authority())
            .map_err(|_| Error::NotFound(format!("artifact run {run_id}")))?;
        let bytes = d
            .read(&rel)
            .map_err(|e| crate::workspace::io_error(&rel, "reading artifact", e))?;
        let file_name = rel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Artifact {
            content_type: sniff(&bytes, &file_name),
            bytes,
            file_name,
        })
    }

    /// Removes expired runs; returns how many.
    pub fn sweep(&self) -> usize {
        let Ok(rd) = std::fs::read_dir(&self.root) else {
            return 0;
        };
        let mut n = 0;
        for e in rd.flatten() {
            let p = e.path();
            if is_run_id(&e.file_name().to_string_lossy())
                && self.expired(&p)
                && std::fs::remove_dir_all(&p).is_ok()
            {
                n += 1;
            }
        }
        n
    }

    fn expired(&self, dir: &Path) -> bool {
        let Ok(meta) = std::fs::metadata(dir) else {
            return true;
        };
        let made = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        SystemTime::now()
            .duration_since(made)
            .is_ok_and(|age| age > self.ttl)
    }
}

fn is_run_id(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

fn new_run_id() -> Result<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)
        .map_err(|e| Error::io("drawing a run id", std::io::Error::other(e.to_string())))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The content type of a file: by magic bytes (images, archives, PDF, audio, ...), then by
/// extension for common text formats, then UTF-8 text or octet-stream. Never a type a browser
/// would execute.
pub fn sniff(bytes: &[u8], name: &str) -> &'static str {
    if let Some(t) = infer::get(bytes) {
        let m = t.mime_type();
        if m.contains("html") || m.contains("xml") || m.contains("javascript") || m.contains("svg")
        {
            return "text/plain; charset=utf-8";
        }
        return m;
    }
    let text = std::str::from_utf8(bytes).is_ok();
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match (ext.as_str(), text) {
        ("csv", true) => "text/csv; charset=utf-8",
        ("json", true) => "application/json",
        ("md", true) => "text/markdown; charset=utf-8",
        (_, true) => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}
