//! Installing a skill from a zip. Every entry is checked, and every file decompressed and
//! measured, before anything is written: names (no absolute paths, no `..`, no drive letters),
//! no symlinks, no name twice and no file that another entry uses as a folder (`a` and
//! `a/b`), at most 4096 entries, 64 MB per file and 256 MB in all measured on the
//! decompressed stream (declared sizes are not trusted), and at most 200 times the archive's
//! size. Files are inflated through a counted, capped copy (never into a buffer sized from a
//! header, and never whole into memory: only `SKILL.md` is kept). Only then is the skill
//! extracted into a temporary folder beside its destination and renamed into place.

use std::collections::{BTreeSet, HashSet};
use std::io::{Cursor, Read, Seek, Write};
use std::path::{Path, PathBuf};

use zip::ZipArchive;

use super::manifest;
use crate::error::{Error, Result};
use crate::workspace::paths;

/// Limits on one archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstallLimits {
    /// Entries in the archive (files and folders).
    pub entries: usize,
    /// Decompressed bytes of one file.
    pub file_bytes: u64,
    /// Decompressed bytes of all files.
    pub total_bytes: u64,
    /// Decompressed bytes per archive byte.
    pub ratio: u64,
}

/// 4096 entries, 64 MB per file, 256 MB in all, 200×.
pub const DEFAULT_INSTALL_LIMITS: InstallLimits = InstallLimits {
    entries: 4096,
    file_bytes: 64 << 20,
    total_bytes: 256 << 20,
    ratio: 200,
};

impl Default for InstallLimits {
    fn default() -> Self {
        DEFAULT_INSTALL_LIMITS
    }
}

fn refuse(msg: impl Into<String>) -> Error {
    Error::SkillArchive(msg.into())
}

/// Entries macOS adds to zips; skipped, not refused.
fn is_noise(name: &str) -> bool {
    name.starts_with("__MACOSX/") || name.rsplit('/').next() == Some(".DS_Store")
}

/// A checked file entry: its index and path inside the skill (prefix removed).
struct Planned {
    index: usize,
    rel: PathBuf,
}

/// Longest `SKILL.md` read (the only file held in memory).
const MANIFEST_MAX: u64 = 1 << 20;

/// Refuses a name given twice, and a file another entry needs as a folder (`a` and `a/b`):
/// either would fail half-way through extraction.
fn check_tree(files: &[(usize, PathBuf)], dirs: &[PathBuf]) -> Result<()> {
    let mut names = HashSet::new();
    let mut parents = BTreeSet::new();
    for (_, p) in files {
        if !names.insert(p.clone()) {
            return Err(refuse(format!(
                "entry {:?} appears twice",
                paths::display(p)
            )));
        }
        parents.extend(p.ancestors().skip(1).map(Path::to_path_buf));
    }
    parents.extend(
        dirs.iter()
            .flat_map(|d| d.ancestors().map(Path::to_path_buf)),
    );
    if let Some((_, p)) = files.iter().find(|(_, p)| parents.contains(p)) {
        return Err(refuse(format!(
            "entry {:?} is a file, and other entries use it as a folder",
            paths::display(p)
        )));
    }
    Ok(())
}

/// Checks names and layout; returns the files to extract and the skill's `SKILL.md` index.
fn plan<R: Read + Seek>(
    archive: &mut ZipArchive<R>,
    limits: &InstallLimits,
) -> Result<Vec<Planned>> {
    if archive.len() > limits.entries {
        return Err(refuse(format!(
            "it has {} entries; at most {} are allowed",
            archive.len(),
            limits.entries
        )));
    }
    let mut files: Vec<(usize, PathBuf)> = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for i in 0..archive.len() {
        let entry = archive
            .by_index_raw(i)
            .map_err(|e| refuse(format!("entry {i} cannot be read: {e}")))?;
        let name = entry
            .name()
            .map_err(|e| refuse(format!("entry {i} has an unreadable name: {e}")))?
            .into_owned();
        if entry.is_symlink() {
            return Err(refuse(format!(
                "entry {name:?} is a symlink; symlinks are not allowed"
            )));
        }
        if is_noise(&name) {
            continue;
        }
        let rel = paths::relative(&name, true).map_err(|e| match e {
            Error::Path { reason, .. } => refuse(format!("entry {name:?} {reason}")),
            other => other,
        })?;
        if name.starts_with('/') || entry.enclosed_name().is_none() {
            return Err(refuse(format!(
                "entry {name:?} is not a relative path inside the skill"
            )));
        }
        if entry.is_dir() || rel.as_os_str().is_empty() {
            dirs.push(rel);
            continue;
        }
        files.push((i, rel));
    }
    check_tree(&files, &dirs)?;
    // Layout: SKILL.md at the root, or one top folder holding SKILL.md.
    let has_root_manifest = files.iter().any(|(_, p)| p == Path::new("SKILL.md"));
    let prefix: PathBuf = if has_root_manifest {
        PathBuf::new()
    } else {
        let tops: std::collections::BTreeSet<PathBuf> = files
            .iter()
            .filter(|(_, p)| p.components().count() == 2 && p.ends_with("SKILL.md"))
            .map(|(_, p)| p.parent().unwrap().to_path_buf())
            .collect();
        match tops.len() {
            0 => {
                return Err(refuse(
                    "it holds no SKILL.md (at the root or in one top folder)",
                ))
            }
            1 => tops.into_iter().next().unwrap(),
            n => {
                return Err(refuse(format!(
                    "it holds {n} skill folders; upload one skill per archive"
                )))
            }
        }
    };
    let mut out = Vec::new();
    for (index, p) in files {
        match p.strip_prefix(&prefix) {
            Ok(rel) if !rel.as_os_str().is_empty() => out.push(Planned {
                index,
                rel: rel.to_path_buf(),
            }),
            _ => {
                return Err(refuse(format!(
                    "entry {:?} lies outside the skill folder {:?}",
                    paths::display(&p),
                    paths::display(&prefix)
                )))
            }
        }
    }
    Ok(out)
}

/// A writer that counts what it is given and passes it on.
struct Counted<W> {
    inner: W,
    n: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(b)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Decompresses every planned file through the limits into the writer `open` gives for it
/// (a file, or nothing to only measure): at most the room left plus one byte is inflated,
/// whatever the entry's header says.
fn measure<R: Read + Seek, W: Write>(
    archive: &mut ZipArchive<R>,
    planned: &[Planned],
    archive_len: u64,
    limits: &InstallLimits,
    mut open: impl FnMut(&Planned) -> Result<W>,
) -> Result<()> {
    let max_total = limits
        .total_bytes
        .min(archive_len.max(1).saturating_mul(limits.ratio));
    let mut total = 0u64;
    for p in planned {
        let mut entry = archive.by_index(p.index).map_err(|e| {
            refuse(format!(
                "entry {:?} cannot be opened: {e}",
                paths::display(&p.rel)
            ))
        })?;
        let room = limits.file_bytes.min(max_total - total);
        let mut out = Counted {
            inner: open(p)?,
            n: 0,
        };
        std::io::copy(&mut (&mut entry).take(room + 1), &mut out).map_err(|e| {
            refuse(format!(
                "entry {:?} does not decompress: {e}",
                paths::display(&p.rel)
            ))
        })?;
        let n = out.n;
        if n > limits.file_bytes {
            return Err(refuse(format!(
                "entry {:?} expands past {} bytes",
                paths::display(&p.rel),
                limits.file_bytes
            )));
        }
        if total + n > max_total {
            return Err(refuse(if max_total < limits.total_bytes {
                format!(
                    "it expands more than {}x its size (a zip bomb?)",
                    limits.ratio
                )
            } else {
                format!("it expands past {} bytes in all", limits.total_bytes)
            }));
        }
        total += n;
        out.flush()
            .map_err(|e| Error::io(format!("writing {}", paths::display(&p.rel)), e))?;
    }
    Ok(())
}

/// Where one planned file goes in the measuring pass: `SKILL.md` into memory (capped), the
/// rest nowhere.
enum Probe {
    Keep(std::rc::Rc<std::cell::RefCell<Vec<u8>>>),
    Drop,
}

impl Write for Probe {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if let Probe::Keep(buf) = self {
            let mut buf = buf.borrow_mut();
            if buf.len() as u64 + b.len() as u64 > MANIFEST_MAX {
                return Err(std::io::Error::other(format!(
                    "SKILL.md is larger than {MANIFEST_MAX} bytes"
                )));
            }
            buf.extend_from_slice(b);
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs into `dir/<name>`; returns the skill's id.
pub(super) fn install(
    dir: &Path,
    zip: &[u8],
    overwrite: bool,
    limits: &InstallLimits,
) -> Result<String> {
    install_from(dir, Cursor::new(zip), zip.len() as u64, overwrite, limits)
}

/// [`install`] from any seekable source of `len` bytes (a file on disk, or memory).
pub(super) fn install_from<R: Read + Seek>(
    dir: &Path,
    zip: R,
    len: u64,
    overwrite: bool,
    limits: &InstallLimits,
) -> Result<String> {
    let mut archive =
        ZipArchive::new(zip).map_err(|e| refuse(format!("it is not a readable zip: {e}")))?;
    let planned = plan(&mut archive, limits)?;
    // Pass 1: measure everything and read SKILL.md; nothing is written.
    let skill_md = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let mut seen_manifest = false;
    measure(&mut archive, &planned, len, limits, |p| {
        Ok(if p.rel == Path::new("SKILL.md") {
            seen_manifest = true;
            Probe::Keep(skill_md.clone())
        } else {
            Probe::Drop
        })
    })?;
    if !seen_manifest {
        return Err(refuse("it holds no SKILL.md"));
    }
    let text =
        String::from_utf8(skill_md.take()).map_err(|_| refuse("SKILL.md is not UTF-8 text"))?;
    let m = manifest::parse(&text, "uploaded archive")?;
    if !manifest::valid_name(&m.name) {
        return Err(refuse(format!(
            "its name {:?} is not 1-64 lowercase letters, digits and hyphens",
            m.name
        )));
    }
    let dest = dir.join(&m.name);
    if dest.exists() && !overwrite {
        return Err(Error::SkillExists(m.name));
    }
    // Pass 2: extract into a temporary folder beside the destination, then rename.
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".install-")
        .tempdir_in(dir)
        .map_err(|e| Error::io(format!("creating a folder in {}", dir.display()), e))?;
    measure(&mut archive, &planned, len, limits, |p| {
        let out = tmp.path().join(&p.rel);
        // Names are the archive's (relative, checked), never the server's folders.
        let shown = paths::display(&p.rel);
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::io(format!("creating the folder of {shown}"), e))?;
        }
        std::fs::File::create_new(&out).map_err(|e| Error::io(format!("writing {shown}"), e))
    })?;
    let staged = tmp.keep();
    if dest.exists() {
        let old = dir.join(format!(".old-{}-{}", m.name, std::process::id()));
        std::fs::rename(&dest, &old)
            .map_err(|e| Error::io(format!("replacing {}", dest.display()), e))?;
        std::fs::rename(&staged, &dest)
            .map_err(|e| Error::io(format!("installing {}", dest.display()), e))?;
        let _ = std::fs::remove_dir_all(&old);
    } else {
        std::fs::rename(&staged, &dest)
            .map_err(|e| Error::io(format!("installing {}", dest.display()), e))?;
    }
    Ok(m.name)
}
