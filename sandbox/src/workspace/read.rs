//! Host-side reads of files a guest made: streamed in chunks up to a cap, never sized from the
//! file's length.
//!
//! A guest can give a file any logical length without writing it (a sparse file, a truncate);
//! `std::fs::read` would reserve that length up front and abort the host on a 100 GiB file.
//! Here the buffer grows only with bytes actually read, and reading stops one byte past the cap.

use std::io::{ErrorKind, Read, Write};
use std::path::Path;

use cap_std::fs::{Dir, File};

/// Bytes read per chunk.
const CHUNK: usize = 64 << 10;

/// The first bytes of a file, at most `max`.
pub(crate) struct Capped {
    /// What was read (at most `max` bytes).
    pub(crate) bytes: Vec<u8>,
    /// True when the file holds more than `max` bytes.
    pub(crate) more: bool,
}

/// Opens `rel` in `dir` for reading, refusing anything but a regular file (a directory, or a
/// device a guest cannot make anyway) with `InvalidInput`.
pub(crate) fn open_file(dir: &Dir, rel: &Path) -> std::io::Result<File> {
    let file = dir.open(rel)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// Reads at most `max` bytes of `rel`, and whether there was more.
pub(crate) fn read_capped(dir: &Dir, rel: &Path, max: u64) -> std::io::Result<Capped> {
    let file = open_file(dir, rel)?;
    let mut bytes = Vec::new();
    let copied = copy_capped(file, &mut bytes, max)?;
    let more = copied > max;
    // The byte past the cap only told that there is more.
    bytes.truncate(bytes.len().min(max as usize));
    Ok(Capped { bytes, more })
}

/// Copies `from` into `to` in chunks until its end or until one byte more than `max` was
/// copied; returns the bytes copied (so a result above `max` means "more than `max`", and
/// exactly `max + 1` bytes were written to `to`).
pub(crate) fn copy_capped(
    mut from: impl Read,
    to: &mut impl Write,
    max: u64,
) -> std::io::Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let limit = max.saturating_add(1);
    let mut total = 0u64;
    while total < limit {
        let want = (limit - total).min(CHUNK as u64) as usize;
        let n = match from.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> (tempfile::TempDir, Dir) {
        let t = tempfile::tempdir().unwrap();
        let d = Dir::open_ambient_dir(t.path(), cap_std::ambient_authority()).unwrap();
        (t, d)
    }

    #[test]
    fn a_small_file_is_read_whole() {
        let (_t, d) = dir();
        d.write("a.txt", b"hello").unwrap();
        let r = read_capped(&d, Path::new("a.txt"), 5).unwrap();
        assert_eq!(r.bytes, b"hello");
        assert!(!r.more);
    }

    #[test]
    fn a_longer_file_is_cut_at_the_cap() {
        let (_t, d) = dir();
        d.write("a.txt", b"hello world").unwrap();
        let r = read_capped(&d, Path::new("a.txt"), 5).unwrap();
        assert_eq!(r.bytes, b"hello");
        assert!(r.more);
    }

    #[test]
    fn a_100_gib_sparse_file_costs_only_the_cap() {
        let (_t, d) = dir();
        let f = d.create("s.bin").unwrap();
        // A sparse file: no block is written, the logical length is 100 GiB.
        f.set_len(100 << 30).unwrap();
        drop(f);
        let r = read_capped(&d, Path::new("s.bin"), 1 << 20).unwrap();
        assert_eq!(r.bytes.len(), 1 << 20);
        assert!(r.bytes.capacity() <= 2 << 20, "{}", r.bytes.capacity());
        assert!(r.more);
    }

    #[test]
    fn a_directory_is_not_read() {
        let (_t, d) = dir();
        d.create_dir("sub").unwrap();
        let e = read_capped(&d, Path::new("sub"), 10).err().unwrap();
        assert!(
            matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::IsADirectory),
            "{e:?}"
        );
    }

    #[test]
    fn copying_stops_one_byte_past_the_cap() {
        let mut out = Vec::new();
        let n = copy_capped(std::io::repeat(7).take(1 << 30), &mut out, 1000).unwrap();
        assert_eq!(n, 1001);
        assert_eq!(out.len(), 1001);
        let mut out = Vec::new();
        let n = copy_capped(&b"abc"[..], &mut out, 1000).unwrap();
        assert_eq!((n, out.as_slice()), (3, &b"abc"[..]));
    }
}
