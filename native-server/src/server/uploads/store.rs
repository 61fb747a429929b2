//! Where uploads live: `DIR/<session key>/<random name>`, with `<name>.json` (what the file is)
//! and, for PDFs, `<name>.txt` (its extracted text) beside it.
//!
//! The session key is a hash of the owner (the principal that uploaded) and the chat-UI session
//! id, so any id (whatever characters a client sends) maps to one safe folder name, and owning
//! a file means it is in that folder: a request naming another session's file, or naming the
//! same session as another principal, finds nothing. Stored names are 128 random bits in hex plus an
//! extension; the client's name is only kept in the metadata, never used as a path.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a stored upload is (its `.json` file).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// The client's file name, reduced to a display name.
    pub file_name: String,
    /// `text`, `pdf` or `image`.
    pub kind: String,
    pub media_type: String,
    pub size: u64,
    /// PDFs: pages in the document and pages with a text layer.
    #[serde(default)]
    pub page_count: Option<usize>,
    #[serde(default)]
    pub text_pages: Option<usize>,
    #[serde(default)]
    pub truncated: bool,
    /// A frame taken from a video upload: its time in the video, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
}

/// The uploads folder.
#[derive(Clone, Debug)]
pub struct Store {
    pub dir: PathBuf,
}

/// Whether `name` has the shape of a stored name (32 hex digits, a dot, a short lowercase
/// extension). Everything else, including `..`, separators and the metadata files, is not.
pub fn valid_name(name: &str) -> bool {
    let Some((stem, ext)) = name.split_once('.') else {
        return false;
    };
    stem.len() == 32
        && stem
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        && (1..=8).contains(&ext.len())
        && ext
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// A fresh stored name with extension `ext`.
pub fn new_name(ext: &str) -> std::io::Result<String> {
    let mut r = [0u8; 16];
    getrandom::fill(&mut r).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(format!("{}.{ext}", hex(&r)))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Store {
    /// The folder of the uploads of `owner`'s session (the NUL keeps ("a", "bc") and
    /// ("ab", "c") apart: neither part can hold one, owners being key ids and ids being text).
    pub fn session_dir(&self, owner: &str, session: &str) -> PathBuf {
        let h = Sha256::digest(format!("{owner}\0{session}").as_bytes());
        self.dir.join(format!("s-{}", hex(&h[..16])))
    }

    /// Writes an upload (each file through a temporary name, so a reader never sees half a
    /// file). `text`: the extracted text of a PDF.
    pub fn save(
        &self,
        owner: &str,
        session: &str,
        name: &str,
        bytes: &[u8],
        text: Option<&str>,
        meta: &Meta,
    ) -> std::io::Result<()> {
        debug_assert!(valid_name(name));
        let dir = self.session_dir(owner, session);
        std::fs::create_dir_all(&dir)?;
        let meta_json = serde_json::to_vec(meta).map_err(std::io::Error::other)?;
        write_atomic(&dir, &format!("{name}.json"), &meta_json)?;
        if let Some(t) = text {
            write_atomic(&dir, &format!("{name}.txt"), t.as_bytes())?;
        }
        write_atomic(&dir, name, bytes)
    }

    /// An upload of `owner`'s session: its path and metadata, or None when the name is not a
    /// stored name or the session has no such file.
    pub fn find(&self, owner: &str, session: &str, name: &str) -> Option<(PathBuf, Meta)> {
        if !valid_name(name) {
            return None;
        }
        let dir = self.session_dir(owner, session);
        let path = dir.join(name);
        let meta = std::fs::read(dir.join(format!("{name}.json"))).ok()?;
        let meta: Meta = serde_json::from_slice(&meta).ok()?;
        path.is_file().then_some((path, meta))
    }

    /// The text the model reads for an upload: the file itself for text, the extracted text
    /// for a PDF (None for a PDF without a text layer and for images).
    pub fn text(&self, owner: &str, session: &str, name: &str) -> Option<(Meta, Option<String>)> {
        let (path, meta) = self.find(owner, session, name)?;
        let text = match meta.kind.as_str() {
            "text" => std::fs::read_to_string(&path).ok(),
            "pdf" => std::fs::read_to_string(path.with_file_name(format!("{name}.txt"))).ok(),
            _ => None,
        };
        Some((meta, text))
    }

    /// Removes every upload of `owner`'s session.
    pub fn drop_session(&self, owner: &str, session: &str) {
        let dir = self.session_dir(owner, session);
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %dir.display(), error = %e, "removing a session's uploads");
            }
        }
    }
}

fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.part"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, dir.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let n = new_name("pdf").unwrap();
        assert!(valid_name(&n), "{n}");
        assert_ne!(n, new_name("pdf").unwrap());
        for bad in [
            "..",
            "../x.txt",
            "0123456789abcdef0123456789abcdef.pdf.json",
            "0123456789abcdef0123456789abcdef.pdf.txt",
            "0123456789ABCDEF0123456789abcdef.pdf",
            "0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcde/.pdf",
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn sessions_do_not_share_files() {
        let dir = std::env::temp_dir().join(format!("weft-upl-{}", std::process::id()));
        let s = Store { dir: dir.clone() };
        let n = new_name("txt").unwrap();
        let meta = Meta {
            file_name: "a.txt".into(),
            kind: "text".into(),
            media_type: "text/plain".into(),
            size: 2,
            page_count: None,
            text_pages: None,
            truncated: false,
            time_s: None,
        };
        s.save("key_a", "one", &n, b"hi", None, &meta).unwrap();
        assert_eq!(s.text("key_a", "one", &n).unwrap().1.as_deref(), Some("hi"));
        assert!(s.find("key_a", "two", &n).is_none());
        assert!(
            s.find("key_b", "one", &n).is_none(),
            "another owner, same session id"
        );
        s.drop_session("key_b", "one");
        assert!(
            s.find("key_a", "one", &n).is_some(),
            "another owner cannot drop them"
        );
        s.drop_session("key_a", "one");
        assert!(s.find("key_a", "one", &n).is_none());
        let _ = std::fs::remove_dir_all(dir);
    }
}
