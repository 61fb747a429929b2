//! Installing a skill from a zip. Every entry is checked, and every file decompressed and
//! measured, before anything is written: names (no absolute paths, no `..`, no drive letters),
//! no symlinks, at most 4096 entries, 64 MB per file and 256 MB in all measured on the
//! decompressed stream (declared sizes are not trusted), and at most 200 times the archive's
//! size. Only then is the skill extracted into a temporary folder beside its destination and
//! renamed into place.

use std::io::{Cursor, Read};
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

/// Checks names and layout; returns the files to extract and the skill's `SKILL.md` index.
fn plan(archive: &mut ZipArchive<Cursor<&[u8]>>, limits: &InstallLimits) -> Result<Vec<Planned>> {
    if archive.len() > limits.entries {
        return Err(refuse(format!(
            "it has {} entries; at most {} are allowed",
            archive.len(),
            limits.entries
        )));
    }
    let mut files: Vec<(usize, PathBuf)> = Vec::new();
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
            continue;
        }
        files.push((i, rel));
    }
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

/// Decompresses every planned file through the limits; calls `sink` with each file's bytes.
fn measure(
    archive: &mut ZipArchive<Cursor<&[u8]>>,
    planned: &[Planned],
    archive_len: u64,
    limits: &InstallLimits,
    mut sink: impl FnMut(&Planned, &[u8]) -> Result<()>,
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
        let mut buf = Vec::new();
        let room = limits.file_bytes.min(max_total - total);
        (&mut entry)
            .take(room + 1)
            .read_to_end(&mut buf)
            .map_err(|e| {
                refuse(format!(
                    "entry {:?} does not decompress: {e}",
                    paths::display(&p.rel)
                ))
            })?;
        let n = buf.len() as u64;
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
        sink(p, &buf)?;
    }
    Ok(())
}

/// Installs into `dir/<name>`; returns the skill's id.
pub(super) fn install(
    dir: &Path,
    zip: &[u8],
    overwrite: bool,
    limits: &InstallLimits,
) -> Result<String> {
    let mut archive = ZipArchive::new(Cursor::new(zip))
        .map_err(|e| refuse(format!("it is not a readable zip: {e}")))?;
    let planned = plan(&mut archive, limits)?;
    // Pass 1: measure everything and read SKILL.md; nothing is written.
    let mut manifest_text = None;
    measure(
        &mut archive,
        &planned,
        zip.len() as u64,
        limits,
        |p, bytes| {
            if p.rel == Path::new("SKILL.md") {
                manifest_text = Some(
                    String::from_utf8(bytes.to_vec())
                        .map_err(|_| refuse("SKILL.md is not UTF-8 text"))?,
                );
            }
            Ok(())
        },
    )?;
    let text = manifest_text.ok_or_else(|| refuse("it holds no SKILL.md"))?;
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
    measure(
        &mut archive,
        &planned,
        zip.len() as u64,
        limits,
        |p, bytes| {
            let out = tmp.path().join(&p.rel);
            if let Some(parent) = out.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
            }
            let mut f = std::fs::File::create_new(&out)
                .map_err(|e| Error::io(format!("writing {}", out.display()), e))?;
            std::io::Write::write_all(&mut f, bytes)
                .map_err(|e| Error::io(format!("writing {}", out.display()), e))
        },
    )?;
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
