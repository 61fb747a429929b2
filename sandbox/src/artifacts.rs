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
use crate::workspace::{paths, read, FileInfo, Workspace};

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

    /// Copies `files` out of `workspace` under a new run id. Files that vanished, lead out of
    /// the workspace or are not regular files are skipped; the file that would pass the per-run
    /// cap and the rest after it are skipped too (the cap is checked while copying).
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
            let Ok(src) = read::open_file(workspace.dir(), &rel) else {
                continue;
            };
            let out = dir.join(&rel);
            if let Some(parent) = out.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
            }
            // Copied in chunks against what is left of the cap, so a file whose length lies
            // (sparse, or growing while copied) costs at most the cap, never its length.
            let room = self.max_bytes - total;
            let mut dst = std::fs::File::create(&out)
                .map_err(|e| Error::io(format!("writing {}", out.display()), e))?;
            let copied = read::copy_capped(src, &mut dst, room)
                .map_err(|e| Error::io(format!("writing {}", out.display()), e))?;
            drop(dst);
            if copied > room {
                let _ = std::fs::remove_file(&out);
                break;
            }
            total += copied;
            let name = paths::display(&rel);
            saved.push(ArtifactFile {
                url: format!("{}/{run_id}/{name}", self.url_prefix),
                bytes: copied,
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
        // Saved files are at most the per-run cap; read no more than that whatever the disk
        // says.
        let bytes = read::read_capped(&d, &rel, self.max_bytes)
            .map_err(|e| crate::workspace::io_error(&rel, "reading artifact", e))?
            .bytes;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn info(path: &str, bytes: u64) -> FileInfo {
        FileInfo {
            path: path.into(),
            bytes,
        }
    }

    #[test]
    fn a_sparse_100_gib_file_is_refused_while_copied() {
        let ws = Workspace::temporary().unwrap();
        ws.write("small.txt", b"kept").unwrap();
        let f = std::fs::File::create(ws.path().join("s.bin")).unwrap();
        f.set_len(100 << 30).unwrap();
        drop(f);
        let root = tempfile::tempdir().unwrap();
        let store = ArtifactStore::new(root.path(), Duration::from_secs(60))
            .unwrap()
            .with_max_bytes(1 << 20);
        let run = store
            .save(&ws, &[info("small.txt", 4), info("s.bin", 100 << 30)])
            .unwrap();
        let names: Vec<&str> = run.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["small.txt"]);
        // Nothing past the cap stays on disk.
        assert!(!root.path().join(&run.run_id).join("s.bin").exists());
        let a = store.open(&run.run_id, "small.txt").unwrap();
        assert_eq!(a.bytes, b"kept");
    }

    #[test]
    fn the_cap_counts_what_is_copied_not_what_was_listed() {
        let ws = Workspace::temporary().unwrap();
        ws.write("a.bin", &[1u8; 600]).unwrap();
        ws.write("b.bin", &[2u8; 600]).unwrap();
        let root = tempfile::tempdir().unwrap();
        let store = ArtifactStore::new(root.path(), Duration::from_secs(60))
            .unwrap()
            .with_max_bytes(1000);
        // The listing says 1 byte each; the files hold 600.
        let run = store
            .save(&ws, &[info("a.bin", 1), info("b.bin", 1)])
            .unwrap();
        assert_eq!(run.files.len(), 1);
        assert_eq!(run.files[0].bytes, 600);
    }

    #[test]
    fn directories_and_links_out_are_skipped() {
        let ws = Workspace::temporary().unwrap();
        std::fs::create_dir(ws.path().join("d")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc/passwd", ws.path().join("out")).unwrap();
        let root = tempfile::tempdir().unwrap();
        let store = ArtifactStore::new(root.path(), Duration::from_secs(60)).unwrap();
        let run = store.save(&ws, &[info("d", 0), info("out", 0)]).unwrap();
        assert!(run.files.is_empty(), "{:?}", run.files);
    }
}
