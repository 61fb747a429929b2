//! A run's workspace: one host directory, seen by the guest as `/workspace`, and the host-side
//! file operations behind the `read_file` / `write_file` / `edit_file` / `list_files` /
//! `apply_patch` tools.
//!
//! Every host-side path is checked lexically ([`paths::relative`]) and then opened through a
//! cap-std [`Dir`], which resolves symlinks inside the workspace only: a link to `/etc/passwd`
//! made by a guest cannot be read or written through.

mod patch;
pub mod paths;
pub(crate) mod read;
mod snapshot;

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;

use crate::error::{Error, Result};
pub use patch::PatchSummary;
pub use snapshot::{Changes, FileInfo, Snapshot};

/// Largest text `read_text` returns at once (more is cut, and says so).
pub const READ_LIMIT: usize = 256 << 10;

/// Largest file the host reads whole ([`Workspace::read`], `edit_file`, `apply_patch`): a
/// bigger one is refused rather than loaded (a guest can make a file of any logical length).
pub const WHOLE_READ_LIMIT: u64 = 64 << 20;

/// One entry of a listing.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Entry {
    /// Path relative to the workspace root, `/`-separated.
    pub path: String,
    /// `file`, `dir` or `symlink`.
    pub kind: &'static str,
    /// Size in bytes (0 for directories and links).
    pub bytes: u64,
}

/// Text read from a file, possibly cut at [`READ_LIMIT`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct TextRead {
    /// The text (invalid UTF-8 replaced).
    pub text: String,
    /// The file's full size.
    pub bytes: u64,
    /// True when `text` holds only the first [`READ_LIMIT`] bytes.
    pub truncated: bool,
}

/// A workspace directory. A temporary one is deleted when dropped.
pub struct Workspace {
    root: PathBuf,
    dir: Dir,
    _temp: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("root", &self.root)
            .finish()
    }
}

/// Maps an I/O error on a workspace path to a clear crate error.
pub(crate) fn io_error(rel: &Path, what: &str, e: std::io::Error) -> Error {
    let shown = paths::display(rel);
    match e.kind() {
        ErrorKind::NotFound => Error::NotFound(shown),
        // cap-std reports a path that resolves outside the directory (through a symlink or an
        // absolute link target) as PermissionDenied.
        ErrorKind::PermissionDenied => Error::path(
            shown,
            "leads outside the workspace (through a symlink) or is not permitted",
        ),
        ErrorKind::InvalidInput | ErrorKind::IsADirectory => {
            Error::path(shown, "is not a regular file")
        }
        _ => Error::io(format!("{what} {shown}"), e),
    }
}

impl Workspace {
    /// A fresh empty directory under the system's temporary directory, deleted on drop.
    pub fn temporary() -> Result<Workspace> {
        let temp = tempfile::Builder::new()
            .prefix("weft-workspace-")
            .tempdir()
            .map_err(|e| Error::io("creating a workspace directory", e))?;
        let mut ws = Workspace::open(temp.path())?;
        ws._temp = Some(temp);
        Ok(ws)
    }

    /// A fresh empty directory under `parent`, deleted on drop.
    pub fn temporary_in(parent: &Path) -> Result<Workspace> {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
        let temp = tempfile::Builder::new()
            .prefix("weft-workspace-")
            .tempdir_in(parent)
            .map_err(|e| Error::io("creating a workspace directory", e))?;
        let mut ws = Workspace::open(temp.path())?;
        ws._temp = Some(temp);
        Ok(ws)
    }

    /// An existing directory used as the workspace (left in place on drop).
    pub fn open(root: &Path) -> Result<Workspace> {
        let root = root
            .canonicalize()
            .map_err(|e| Error::io(format!("opening workspace {}", root.display()), e))?;
        let dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority())
            .map_err(|e| Error::io(format!("opening workspace {}", root.display()), e))?;
        Ok(Workspace {
            root,
            dir,
            _temp: None,
        })
    }

    /// The host directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The capability handle on the root.
    pub(crate) fn dir(&self) -> &Dir {
        &self.dir
    }

    /// A checked relative path (see [`paths::relative`]).
    pub fn resolve(&self, path: &str) -> Result<PathBuf> {
        paths::relative(path, false)
    }

    /// The bytes of a file of at most [`WHOLE_READ_LIMIT`] bytes (a larger one is an
    /// [`Error::TooLarge`]). Read in chunks: nothing is sized from the file's length.
    pub fn read(&self, path: &str) -> Result<Vec<u8>> {
        self.read_whole(path, WHOLE_READ_LIMIT)
    }

    /// The bytes of a file of at most `max` bytes; a larger one is an [`Error::TooLarge`].
    pub fn read_whole(&self, path: &str, max: u64) -> Result<Vec<u8>> {
        let rel = self.resolve(path)?;
        let r =
            read::read_capped(&self.dir, &rel, max).map_err(|e| io_error(&rel, "reading", e))?;
        if r.more {
            return Err(Error::TooLarge {
                path: paths::display(&rel),
                limit: max,
            });
        }
        Ok(r.bytes)
    }

    /// The size of a file (its logical length), without reading it.
    pub fn file_len(&self, path: &str) -> Result<u64> {
        let rel = self.resolve(path)?;
        let file = read::open_file(&self.dir, &rel).map_err(|e| io_error(&rel, "opening", e))?;
        let meta = file.metadata().map_err(|e| io_error(&rel, "opening", e))?;
        Ok(meta.len())
    }

    /// Whether `path` names anything in the workspace (a file, a directory, a link).
    pub fn exists(&self, path: &str) -> Result<bool> {
        let rel = self.resolve(path)?;
        Ok(self.dir.symlink_metadata(&rel).is_ok())
    }

    /// The text of a file, cut at [`READ_LIMIT`]: only that much is read, whatever its size.
    pub fn read_text(&self, path: &str) -> Result<TextRead> {
        let rel = self.resolve(path)?;
        let file = read::open_file(&self.dir, &rel).map_err(|e| io_error(&rel, "reading", e))?;
        let total = file
            .metadata()
            .map_err(|e| io_error(&rel, "reading", e))?
            .len();
        let mut bytes = Vec::new();
        let copied = read::copy_capped(file, &mut bytes, READ_LIMIT as u64)
            .map_err(|e| io_error(&rel, "reading", e))?;
        let truncated = copied > READ_LIMIT as u64 || total > READ_LIMIT as u64;
        bytes.truncate(READ_LIMIT);
        Ok(TextRead {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            bytes: total.max(bytes.len() as u64),
            truncated,
        })
    }

    /// Writes a file, creating its parent directories; returns the bytes written.
    pub fn write(&self, path: &str, contents: &[u8]) -> Result<u64> {
        let rel = self.resolve(path)?;
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.dir
                .create_dir_all(parent)
                .map_err(|e| io_error(parent, "creating directory", e))?;
        }
        self.dir
            .write(&rel, contents)
            .map_err(|e| io_error(&rel, "writing", e))?;
        Ok(contents.len() as u64)
    }

    /// Replaces `old` by `new` in a text file. `old` must occur exactly once unless `all`, in
    /// which case every occurrence is replaced. Returns how many were replaced.
    pub fn edit(&self, path: &str, old: &str, new: &str, all: bool) -> Result<usize> {
        if old.is_empty() {
            return Err(Error::Edit(
                "old_string is empty; give the exact text to replace".into(),
            ));
        }
        let bytes = self.read(path)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::Edit(format!("{path} is not UTF-8 text")))?;
        let count = text.matches(old).count();
        if count == 0 {
            return Err(Error::Edit(format!(
                "old_string was not found in {path}; read the file and copy the text exactly"
            )));
        }
        if count > 1 && !all {
            return Err(Error::Edit(format!(
                "old_string occurs {count} times in {path}; give more context or set replace_all"
            )));
        }
        let edited = if all {
            text.replace(old, new)
        } else {
            text.replacen(old, new, 1)
        };
        self.write(path, edited.as_bytes())?;
        Ok(count)
    }

    /// Entries under `path` (the root when empty or `.`), sorted; recursive when asked,
    /// never following symlinks. At most `max` entries.
    pub fn list(&self, path: &str, recursive: bool, max: usize) -> Result<Vec<Entry>> {
        let rel = paths::relative(if path.is_empty() { "." } else { path }, true)?;
        let mut out = Vec::new();
        let start = if rel.as_os_str().is_empty() {
            self.dir
                .try_clone()
                .map_err(|e| Error::io("opening workspace", e))?
        } else {
            self.dir
                .open_dir(&rel)
                .map_err(|e| io_error(&rel, "listing", e))?
        };
        list_into(&start, &rel, recursive, max, 0, &mut out)?;
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Applies a unified diff (one or more files; `/dev/null` adds or deletes). Every hunk is
    /// checked before any file is written.
    pub fn apply_patch(&self, patch: &str) -> Result<PatchSummary> {
        patch::apply(self, patch)
    }

    /// Sizes and times of every file, for [`Snapshot::changes`].
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::take(&self.dir)
    }
}

fn list_into(
    dir: &Dir,
    prefix: &Path,
    recursive: bool,
    max: usize,
    depth: usize,
    out: &mut Vec<Entry>,
) -> Result<()> {
    let entries = dir.entries().map_err(|e| io_error(prefix, "listing", e))?;
    for entry in entries {
        if out.len() >= max {
            return Ok(());
        }
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let rel = prefix.join(&name);
        let Ok(ft) = entry.file_type() else { continue };
        let (kind, bytes) = if ft.is_symlink() {
            ("symlink", 0)
        } else if ft.is_dir() {
            ("dir", 0)
        } else {
            ("file", entry.metadata().map(|m| m.len()).unwrap_or(0))
        };
        out.push(Entry {
            path: paths::display(&rel),
            kind,
            bytes,
        });
        if kind == "dir" && recursive && depth < 32 {
            if let Ok(sub) = dir.open_dir(&name) {
                list_into(&sub, &rel, recursive, max, depth + 1, out)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 100 GiB sparse file, as `open('s.bin','wb').truncate(100<<30)` would leave.
    fn sparse(ws: &Workspace) {
        let f = std::fs::File::create(ws.path().join("s.bin")).unwrap();
        f.set_len(100 << 30).unwrap();
    }

    #[test]
    fn reading_a_sparse_file_whole_is_refused_not_allocated() {
        let ws = Workspace::temporary().unwrap();
        sparse(&ws);
        let e = ws.read("s.bin").unwrap_err();
        assert!(matches!(e, Error::TooLarge { .. }), "{e}");
        assert!(e.is_caller_fault());
        assert!(e.to_string().contains("s.bin"), "{e}");
        assert!(
            !e.to_string().contains(&*ws.path().to_string_lossy()),
            "{e}"
        );
    }

    #[test]
    fn read_text_reads_only_its_limit() {
        let ws = Workspace::temporary().unwrap();
        sparse(&ws);
        let t = ws.read_text("s.bin").unwrap();
        assert!(t.truncated);
        assert_eq!(t.bytes, 100 << 30);
        assert_eq!(t.text.len(), READ_LIMIT);
        assert_eq!(ws.file_len("s.bin").unwrap(), 100 << 30);
    }

    #[test]
    fn edit_refuses_a_file_too_large_to_hold() {
        let ws = Workspace::temporary().unwrap();
        sparse(&ws);
        let e = ws.edit("s.bin", "a", "b", false).unwrap_err();
        assert!(matches!(e, Error::TooLarge { .. }), "{e}");
    }

    #[test]
    fn small_files_read_as_before() {
        let ws = Workspace::temporary().unwrap();
        ws.write("a/b.txt", b"hello").unwrap();
        assert_eq!(ws.read("a/b.txt").unwrap(), b"hello");
        let t = ws.read_text("a/b.txt").unwrap();
        assert_eq!((t.text.as_str(), t.bytes, t.truncated), ("hello", 5, false));
        assert!(ws.exists("a").unwrap());
        assert!(!ws.exists("nope").unwrap());
        let e = ws.read("a").unwrap_err();
        assert!(matches!(e, Error::Path { .. }), "{e}");
    }
}
