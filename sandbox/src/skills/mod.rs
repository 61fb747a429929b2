//! Agent skills: folders holding a `SKILL.md` (YAML front matter with name and description, then
//! instructions) plus any scripts, references and assets.
//!
//! A [`SkillRegistry`] scans its directories on every call (they are small, and this keeps
//! installs, deletes and hand edits visible at once): the install directory (origin
//! `installed`, e.g. `$WEFT_HOME/skills`) first, then each configured directory (origin
//! `discovered`, e.g. `--skills-dir`). Zips install into the install directory after every
//! entry has been checked ([`install`]).

mod install;
pub mod manifest;
mod tools;

use std::path::{Path, PathBuf};

use cap_std::fs::Dir;

use crate::error::{Error, Result};
use crate::workspace::paths;
pub use install::{InstallLimits, DEFAULT_INSTALL_LIMITS};
pub use manifest::Manifest;
pub use tools::{skills_list, skills_read};

/// Where a skill came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SkillOrigin {
    /// Found by scanning a configured directory (read-only here).
    Discovered,
    /// Installed from a zip into the install directory (can be deleted).
    Installed,
}

/// One file of a skill.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SkillFile {
    /// Path inside the skill folder, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// `script`, `reference`, `asset`, `manifest` or `other`.
    pub kind: &'static str,
    /// True when the file looks like UTF-8 text.
    pub text: bool,
}

/// A loaded skill (the `/api/skills` object, less `object: "skill"` which a surface adds).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Skill {
    /// The skill's id: its folder name.
    pub id: String,
    /// `name:` from the front matter.
    pub name: String,
    /// `description:` from the front matter.
    pub description: String,
    /// `license:`, if any.
    pub license: Option<String>,
    /// `compatibility:`, if any.
    pub compatibility: Option<String>,
    /// Every file, sorted by path.
    pub files: Vec<SkillFile>,
    /// Total size of the files.
    pub bytes: u64,
    /// Where it came from.
    pub origin: SkillOrigin,
    /// What loaded despite being out of spec.
    pub warnings: Vec<String>,
    /// Last modification of `SKILL.md`, RFC 3339 (UTC).
    pub modified: Option<String>,
    /// The `SKILL.md` body (the instructions).
    #[serde(skip)]
    pub instructions: String,
    /// The folder on the host.
    #[serde(skip)]
    pub path: PathBuf,
}

/// A folder that looked like a skill and failed to load.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoadError {
    /// The folder.
    pub path: String,
    /// Why.
    pub message: String,
}

/// Everything a scan found.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Listing {
    /// Skills, installed first, then discovered, each group sorted by id.
    pub skills: Vec<Skill>,
    /// Folders that failed to load.
    pub errors: Vec<LoadError>,
}

/// The skills a server offers.
#[derive(Clone, Debug, Default)]
pub struct SkillRegistry {
    install_dir: Option<PathBuf>,
    dirs: Vec<PathBuf>,
    limits: InstallLimits,
}

/// Largest `SKILL.md` read (instructions longer than this are not a skill anyone can use).
const MAX_MANIFEST: u64 = 1 << 20;
/// Files listed per skill at most.
const MAX_FILES: usize = 4096;

impl SkillRegistry {
    /// A registry installing into `install_dir` (None: installs refused) and discovering in
    /// `dirs` as well.
    pub fn new(install_dir: Option<PathBuf>, dirs: Vec<PathBuf>) -> Self {
        SkillRegistry {
            install_dir,
            dirs,
            limits: DEFAULT_INSTALL_LIMITS,
        }
    }

    /// The same registry with other zip limits (tests use small ones).
    pub fn with_install_limits(mut self, limits: InstallLimits) -> Self {
        self.limits = limits;
        self
    }

    /// True when zips can be installed.
    pub fn installable(&self) -> bool {
        self.install_dir.is_some()
    }

    /// The install directory, if any.
    pub fn install_dir(&self) -> Option<&Path> {
        self.install_dir.as_deref()
    }

    /// Scans every directory.
    pub fn list(&self) -> Listing {
        let mut out = Listing::default();
        let groups = self
            .install_dir
            .iter()
            .map(|d| (d, SkillOrigin::Installed))
            .chain(self.dirs.iter().map(|d| (d, SkillOrigin::Discovered)));
        for (dir, origin) in groups {
            let Ok(rd) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut folders: Vec<PathBuf> = rd
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .filter(|p| {
                    !p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect();
            folders.sort();
            for folder in folders {
                if !folder.join("SKILL.md").is_file() {
                    continue;
                }
                match load(&folder, origin) {
                    Ok(skill) => {
                        if out.skills.iter().any(|s| s.id == skill.id) {
                            out.errors.push(LoadError {
                                path: folder.display().to_string(),
                                message: format!(
                                    "a skill with id {:?} was already loaded from an earlier directory",
                                    skill.id
                                ),
                            });
                        } else {
                            out.skills.push(skill);
                        }
                    }
                    Err(e) => out.errors.push(LoadError {
                        path: folder.display().to_string(),
                        message: match e {
                            Error::Skill { message, .. } => message,
                            other => other.to_string(),
                        },
                    }),
                }
            }
        }
        out
    }

    /// One skill by id.
    pub fn get(&self, id: &str) -> Result<Skill> {
        self.list()
            .skills
            .into_iter()
            .find(|s| s.id == id)
            .ok_or_else(|| Error::NotFound(format!("skill {id}")))
    }

    /// The named skills, in order; an unknown name is an error naming it (a server's 400).
    pub fn select(&self, names: &[String]) -> Result<Vec<Skill>> {
        let all = self.list().skills;
        names
            .iter()
            .map(|n| {
                all.iter()
                    .find(|s| &s.id == n || &s.name == n)
                    .cloned()
                    .ok_or_else(|| Error::Skill {
                        name: n.clone(),
                        message: "no such skill on this server".into(),
                    })
            })
            .collect()
    }

    /// The bytes of a file inside a skill (path checked, symlinks out of the folder refused).
    pub fn read_file(&self, id: &str, path: &str) -> Result<Vec<u8>> {
        let skill = self.get(id)?;
        let rel = paths::relative(path, false)?;
        let dir = Dir::open_ambient_dir(&skill.path, cap_std::ambient_authority())
            .map_err(|e| Error::io(format!("opening skill {id}"), e))?;
        dir.read(&rel)
            .map_err(|e| crate::workspace::io_error(&rel, "reading", e))
    }

    /// Installs a skill from a zip (see [`install`] for the checks); returns it as listed.
    pub fn install_zip(&self, zip: &[u8], overwrite: bool) -> Result<Skill> {
        let dir = self.install_dir.as_deref().ok_or_else(|| Error::Skill {
            name: String::new(),
            message: "this server has no skills install directory".into(),
        })?;
        let id = install::install(dir, zip, overwrite, &self.limits)?;
        self.get(&id)
    }

    /// [`Self::install_zip`] from a zip in a file (an upload spooled to disk), so an archive
    /// is never held in memory whatever its size.
    pub fn install_zip_file(&self, mut file: std::fs::File, overwrite: bool) -> Result<Skill> {
        use std::io::Seek;
        let dir = self.install_dir.as_deref().ok_or_else(|| Error::Skill {
            name: String::new(),
            message: "this server has no skills install directory".into(),
        })?;
        let len = file
            .seek(std::io::SeekFrom::End(0))
            .and_then(|n| file.rewind().map(|()| n))
            .map_err(|e| Error::io("reading the uploaded skill archive".to_string(), e))?;
        let zip = std::io::BufReader::new(file);
        let id = install::install_from(dir, zip, len, overwrite, &self.limits)?;
        self.get(&id)
    }

    /// Deletes an installed skill.
    pub fn delete(&self, id: &str) -> Result<()> {
        let skill = self.get(id)?;
        if skill.origin != SkillOrigin::Installed {
            return Err(Error::SkillNotDeletable(id.into()));
        }
        std::fs::remove_dir_all(&skill.path)
            .map_err(|e| Error::io(format!("deleting skill {id}"), e))
    }

    /// Copies a skill's files into `workspace` under `skills/<id>/`, so its scripts can run in
    /// the sandbox; returns that folder (workspace-relative).
    pub fn copy_into(&self, id: &str, workspace: &crate::Workspace) -> Result<String> {
        let skill = self.get(id)?;
        let base = format!("skills/{}", skill.id);
        for f in &skill.files {
            let bytes = self.read_file(id, &f.path)?;
            workspace.write(&format!("{base}/{}", f.path), &bytes)?;
        }
        Ok(base)
    }
}

/// Loads one skill folder.
fn load(folder: &Path, origin: SkillOrigin) -> Result<Skill> {
    let id = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let manifest_path = folder.join("SKILL.md");
    let meta = std::fs::symlink_metadata(&manifest_path)
        .map_err(|e| Error::io(format!("reading {}", manifest_path.display()), e))?;
    if !meta.is_file() {
        return Err(Error::Skill {
            name: id,
            message: "SKILL.md is not a regular file".into(),
        });
    }
    if meta.len() > MAX_MANIFEST {
        return Err(Error::Skill {
            name: id,
            message: format!("SKILL.md is larger than {MAX_MANIFEST} bytes"),
        });
    }
    let text = std::fs::read_to_string(&manifest_path).map_err(|_| Error::Skill {
        name: id.clone(),
        message: "SKILL.md is not UTF-8 text".into(),
    })?;
    let m = manifest::parse(&text, &id)?;
    let mut warnings = Vec::new();
    if m.name != id {
        warnings.push(format!(
            "name {:?} disagrees with its directory {id:?}",
            m.name
        ));
    }
    if !manifest::valid_name(&m.name) {
        warnings.push(format!(
            "name {:?} is not 1-64 lowercase letters, digits and hyphens",
            m.name
        ));
    }
    if m.description.chars().count() > manifest::MAX_DESCRIPTION {
        warnings.push(format!(
            "description is longer than {} characters",
            manifest::MAX_DESCRIPTION
        ));
    }
    let mut files = Vec::new();
    collect_files(folder, Path::new(""), 0, &mut files);
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let bytes = files.iter().map(|f| f.bytes).sum();
    let modified = meta
        .modified()
        .ok()
        .map(|t| humantime::format_rfc3339_seconds(t).to_string());
    Ok(Skill {
        id,
        name: m.name,
        description: m.description,
        license: m.license,
        compatibility: m.compatibility,
        files,
        bytes,
        origin,
        warnings,
        modified,
        instructions: m.body,
        path: folder.to_path_buf(),
    })
}

fn collect_files(base: &Path, rel: &Path, depth: usize, out: &mut Vec<SkillFile>) {
    let Ok(rd) = std::fs::read_dir(base.join(rel)) else {
        return;
    };
    for e in rd.flatten() {
        if out.len() >= MAX_FILES {
            return;
        }
        let Ok(ft) = e.file_type() else { continue };
        let r = rel.join(e.file_name());
        if ft.is_dir() && depth < 16 {
            collect_files(base, &r, depth + 1, out);
        } else if ft.is_file() {
            let path = paths::display(&r);
            let bytes = e.metadata().map(|m| m.len()).unwrap_or(0);
            out.push(SkillFile {
                kind: kind_of(&path),
                text: looks_like_text(&base.join(&r)),
                path,
                bytes,
            });
        }
    }
}

/// The peer's file kinds: by folder first (`scripts/`, `references/`, `assets/`), then by
/// extension.
fn kind_of(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    let first = path.split('/').next().unwrap_or("");
    if path == "SKILL.md" {
        "manifest"
    } else if first == "scripts" {
        "script"
    } else if first == "references" || first == "reference" {
        "reference"
    } else if first == "assets" {
        "asset"
    } else {
        match ext.as_deref() {
            Some("py" | "js" | "mjs" | "sh" | "ts" | "rb" | "pl") => "script",
            Some("md" | "txt" | "rst") => "reference",
            Some(
                "png" | "jpg" | "jpeg" | "gif" | "svg" | "pdf" | "ttf" | "otf" | "woff" | "xlsx"
                | "docx",
            ) => "asset",
            _ => "other",
        }
    }
}

/// UTF-8 without NUL in the first 8 KiB.
fn looks_like_text(path: &Path) -> bool {
    use std::io::Read;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let mut buf = Vec::with_capacity(8192);
    if f.take(8192).read_to_end(&mut buf).is_err() {
        return false;
    }
    if buf.contains(&0) {
        return false;
    }
    match std::str::from_utf8(&buf) {
        Ok(_) => true,
        // A multi-byte character cut at the 8 KiB boundary is still text.
        Err(e) => e.error_len().is_none(),
    }
}
