//! Lexical checks on paths given by the model or a user, before any file system call.
//!
//! These give clear errors for the common escapes; the I/O itself then goes through cap-std,
//! which also refuses symlinks that lead out of the workspace.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// The workspace's path inside the guest; host-side tools accept it as a prefix too, since the
/// model sees its files there.
pub const GUEST_ROOT: &str = "/workspace";

/// A path relative to the workspace root, checked: not empty, no NUL, not absolute (except under
/// `/workspace`), no `..`, no drive or UNC prefix. `.` components are dropped. An empty result
/// (the root itself) is allowed only when `allow_root`.
pub fn relative(path: &str, allow_root: bool) -> Result<PathBuf> {
    if path.contains('\0') {
        return Err(Error::path(path, "contains a NUL byte"));
    }
    let trimmed = if path == GUEST_ROOT {
        ""
    } else if let Some(rest) = path.strip_prefix("/workspace/") {
        rest
    } else {
        path
    };
    if trimmed.starts_with('/') || trimmed.starts_with('\\') {
        return Err(Error::path(
            path,
            "is absolute; give a path inside the workspace (relative, or under /workspace)",
        ));
    }
    if trimmed.contains('\\') {
        return Err(Error::path(
            path,
            "contains a backslash; use / between names",
        ));
    }
    let mut out = PathBuf::new();
    for c in Path::new(trimmed).components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(Error::path(
                    path,
                    "contains `..`; paths stay inside the workspace",
                ));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(Error::path(
                    path,
                    "is absolute; give a path inside the workspace",
                ));
            }
        }
    }
    if out.as_os_str().is_empty() && !allow_root {
        return Err(Error::path(path, "names no file"));
    }
    if out
        .to_str()
        .is_some_and(|s| s.split('/').next().is_some_and(|first| first.contains(':')))
    {
        return Err(Error::path(
            path,
            "looks like a drive or URL; give a workspace path",
        ));
    }
    Ok(out)
}

/// The `/`-separated form of a relative path (the form reported to callers on every OS).
pub fn display(path: &Path) -> String {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_and_guest_paths() {
        assert_eq!(
            relative("a/b.txt", false).unwrap(),
            PathBuf::from("a/b.txt")
        );
        assert_eq!(relative("./a//b", false).unwrap(), PathBuf::from("a/b"));
        assert_eq!(
            relative("/workspace/x.csv", false).unwrap(),
            PathBuf::from("x.csv")
        );
        assert_eq!(relative("/workspace", true).unwrap(), PathBuf::new());
        assert_eq!(relative(".", true).unwrap(), PathBuf::new());
    }

    #[test]
    fn refuses_escapes() {
        for bad in [
            "../x",
            "a/../../x",
            "a/..",
            "/etc/passwd",
            "/workspace/../etc/passwd",
            "/workspacex/a",
            "\\\\server\\share",
            "C:\\x",
            "c:/x",
            "a\0b",
            "",
            ".",
        ] {
            let e = relative(bad, false).unwrap_err();
            assert!(matches!(e, Error::Path { .. }), "{bad:?}: {e}");
        }
    }
}
