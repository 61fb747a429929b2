//! Which files a run created or changed: sizes and modification times before and after.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use cap_std::fs::Dir;

use super::paths;

/// Walks at most this many entries (a guest creating millions of files cannot make the host
/// walk forever; its entry count is capped anyway).
const MAX_ENTRIES: usize = 20_000;
const MAX_DEPTH: usize = 32;

/// A regular file in the workspace.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FileInfo {
    /// Path relative to the workspace root, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// Regular files by path, with size and modification time (symlinks are not followed or listed).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    files: BTreeMap<String, (u64, Option<SystemTime>)>,
    /// Every entry seen (files, directories, symlinks, others).
    entries: u64,
}

/// The difference between two snapshots.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Changes {
    /// Files that did not exist before.
    pub created: Vec<FileInfo>,
    /// Files whose size or modification time changed.
    pub modified: Vec<FileInfo>,
    /// Files that no longer exist.
    pub deleted: Vec<String>,
}

impl Changes {
    /// Created and modified files together.
    pub fn written(&self) -> impl Iterator<Item = &FileInfo> {
        self.created.iter().chain(self.modified.iter())
    }
}

impl Snapshot {
    pub(crate) fn take(dir: &Dir) -> Snapshot {
        let mut s = Snapshot::default();
        walk(dir, Path::new(""), 0, &mut s);
        s
    }

    /// The logical length of every regular file, added up (a sparse file counts at its
    /// length).
    pub fn bytes(&self) -> u64 {
        self.files.values().map(|(len, _)| *len).sum()
    }

    /// How many entries the workspace holds (files, directories, symlinks, ...).
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// What changed from `self` (before) to `after`.
    pub fn changes(&self, after: &Snapshot) -> Changes {
        let mut c = Changes::default();
        for (path, (len, time)) in &after.files {
            let info = FileInfo {
                path: path.clone(),
                bytes: *len,
            };
            match self.files.get(path) {
                None => c.created.push(info),
                Some((l0, t0)) if l0 != len || t0 != time => c.modified.push(info),
                Some(_) => {}
            }
        }
        c.deleted = self
            .files
            .keys()
            .filter(|p| !after.files.contains_key(*p))
            .cloned()
            .collect();
        c
    }

    /// Every file, sorted by path.
    pub fn files(&self) -> Vec<FileInfo> {
        self.files
            .iter()
            .map(|(p, (len, _))| FileInfo {
                path: p.clone(),
                bytes: *len,
            })
            .collect()
    }
}

fn walk(dir: &Dir, prefix: &Path, depth: usize, out: &mut Snapshot) {
    let Ok(entries) = dir.entries() else { return };
    for entry in entries.flatten() {
        if out.entries >= MAX_ENTRIES as u64 {
            return;
        }
        out.entries += 1;
        let name = entry.file_name();
        let rel = prefix.join(&name);
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            if depth < MAX_DEPTH {
                if let Ok(sub) = dir.open_dir(&name) {
                    walk(&sub, &rel, depth + 1, out);
                }
            }
        } else if ft.is_file() {
            let Ok(meta) = entry.metadata() else { continue };
            let time = meta.modified().ok().map(|t| t.into_std());
            out.files.insert(paths::display(&rel), (meta.len(), time));
        }
    }
}
