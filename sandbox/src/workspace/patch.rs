//! `apply_patch`: a unified diff (plain or `git diff` style, one or more files) applied to the
//! workspace. Parsing and hunk application are diffy's; every file's result is computed first,
//! so a patch with one bad hunk changes nothing.

use std::borrow::Cow;

use diffy::patch_set::{FileOperation, ParseOptions, PatchKind, PatchSet};

use super::Workspace;
use crate::error::{Error, Result};

/// What a patch did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PatchSummary {
    /// Files created.
    pub created: Vec<String>,
    /// Files changed in place (or renamed: listed under the new name).
    pub modified: Vec<String>,
    /// Files removed.
    pub deleted: Vec<String>,
}

enum Action {
    Write(String, String),
    Delete(String),
}

/// `a/x` and `b/x` (git's prefixes) become `x`.
fn strip(path: &str) -> &str {
    path.strip_prefix("a/")
        .or_else(|| path.strip_prefix("b/"))
        .unwrap_or(path)
}

fn text(ws: &Workspace, path: &str) -> Result<String> {
    let bytes = ws.read(path)?;
    String::from_utf8(bytes).map_err(|_| Error::Edit(format!("{path} is not UTF-8 text")))
}

pub(super) fn apply(ws: &Workspace, patch: &str) -> Result<PatchSummary> {
    let opts = if patch.lines().any(|l| l.starts_with("diff --git ")) {
        ParseOptions::gitdiff()
    } else {
        ParseOptions::unidiff()
    };
    let mut actions = Vec::new();
    let mut summary = PatchSummary::default();
    for (i, file) in PatchSet::parse(patch, opts).enumerate() {
        let file = file
            .map_err(|e| Error::Edit(format!("the patch does not parse (file {}): {e}", i + 1)))?;
        let PatchKind::Text(hunks) = file.patch() else {
            return Err(Error::Edit("binary patches are not supported".into()));
        };
        let apply_to = |path: &str, base: &str| -> Result<String> {
            diffy::apply(base, hunks).map_err(|e| {
                Error::Edit(format!(
                    "the patch does not apply to {path}: {e}; read the file and make the context lines match"
                ))
            })
        };
        match file.operation() {
            FileOperation::Create(p) => {
                let p = strip(p).to_string();
                ws.resolve(&p)?;
                if ws.exists(&p)? {
                    return Err(Error::Edit(format!(
                        "{p} already exists; patch it instead of creating it"
                    )));
                }
                let new = apply_to(&p, "")?;
                summary.created.push(p.clone());
                actions.push(Action::Write(p, new));
            }
            FileOperation::Delete(p) => {
                let p = strip(p).to_string();
                let base = text(ws, &p)?;
                apply_to(&p, &base)?;
                summary.deleted.push(p.clone());
                actions.push(Action::Delete(p));
            }
            FileOperation::Modify { original, modified } => {
                let (from, to) = (strip(original).to_string(), strip(modified).to_string());
                let base = text(ws, &from)?;
                let new = apply_to(&from, &base)?;
                ws.resolve(&to)?;
                if from != to {
                    actions.push(Action::Delete(from.clone()));
                }
                summary.modified.push(to.clone());
                actions.push(Action::Write(to, new));
            }
            FileOperation::Rename { from, to } | FileOperation::Copy { from, to } => {
                let is_rename = matches!(file.operation(), FileOperation::Rename { .. });
                let (from, to): (Cow<str>, Cow<str>) = (from.clone(), to.clone());
                let (from, to) = (strip(&from).to_string(), strip(&to).to_string());
                let base = text(ws, &from)?;
                let new = apply_to(&from, &base)?;
                ws.resolve(&to)?;
                if is_rename {
                    actions.push(Action::Delete(from));
                }
                summary.modified.push(to.clone());
                actions.push(Action::Write(to, new));
            }
        }
    }
    if actions.is_empty() {
        return Err(Error::Edit("the patch changes no file".into()));
    }
    for a in actions {
        match a {
            Action::Write(p, t) => {
                ws.write(&p, t.as_bytes())?;
            }
            Action::Delete(p) => {
                let rel = ws.resolve(&p)?;
                ws.dir()
                    .remove_file(&rel)
                    .map_err(|e| super::io_error(&rel, "deleting", e))?;
            }
        }
    }
    Ok(summary)
}
