//! The backup ZIP: writing one, and reading one back without trusting it.
//!
//! Layout (format 1): `manifest.json`, `settings.json` (a readable copy of the settings; a
//! restore takes them from the `settings` table), and `tables/<table>.jsonl` with one JSON
//! object per row for each table in `weft_storage::TABLES`. The manifest lists every other
//! entry with its size and SHA-256.
//!
//! Reading is bounded: the archive is read from a file (or any seekable source), and entry
//! count, each entry's inflated size, the total, and the compression ratio are checked while
//! inflating. The ratio is the inflated bytes over the compressed bytes actually read from
//! the source so far ([`Counting`]), never the sizes an entry's headers declare, so a header
//! that lies about its compressed size trips the check after a few MiB as an honest bomb
//! does. Names must be exactly the expected ones, and symlink entries are refused, so nothing
//! from the archive ever reaches a file path.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::rc::Rc;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use weft_storage::{DumpItem, Row, TABLES};

/// The archive layout this build writes and reads.
pub const FORMAT: u32 = 1;
/// Most entries an archive may have (every table plus the manifest and settings, with room).
pub const MAX_ENTRIES: usize = 64;
/// Most bytes one entry may inflate to.
pub const MAX_ENTRY: u64 = 256 << 20;
/// Most bytes all entries may inflate to together.
pub const MAX_TOTAL: u64 = 512 << 20;
/// Largest inflated/compressed ratio accepted once an entry passes [`RATIO_FLOOR`] bytes:
/// JSON rows compress about 5-20×; a run of zeros, about 1000×.
pub const MAX_RATIO: u64 = 200;
const RATIO_FLOOR: u64 = 1 << 20;

const MANIFEST: &str = "manifest.json";
const SETTINGS: &str = "settings.json";

/// `manifest.json`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub weft_version: String,
    /// The schema version of the database the backup was taken from.
    pub schema_version: i64,
    /// `sqlite` or `postgres` (informative: either restores into either).
    pub backend: String,
    /// Unix seconds.
    pub created_at: i64,
    pub entries: Vec<EntryInfo>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct EntryInfo {
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

/// Why an archive was refused: a status (400 malformed, 413 too big, 422 does not fit) and
/// a message for the caller.
#[derive(Debug)]
pub struct Refused(pub StatusCode, pub String);

fn bad(msg: impl Into<String>) -> Refused {
    Refused(StatusCode::BAD_REQUEST, msg.into())
}

fn too_big(msg: impl Into<String>) -> Refused {
    Refused(StatusCode::PAYLOAD_TOO_LARGE, msg.into())
}

fn unfit(msg: impl Into<String>) -> Refused {
    Refused(StatusCode::UNPROCESSABLE_ENTITY, msg.into())
}

fn table_entry(table: &str) -> String {
    format!("tables/{table}.jsonl")
}

fn sha256_hex(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|x| format!("{x:02x}")).collect()
}

/// The entry being written: its name, bytes so far and running SHA-256.
struct Open(String, u64, Sha256);

impl Open {
    fn close(self) -> EntryInfo {
        EntryInfo {
            name: self.0,
            size: self.1,
            sha256: hex(&self.2.finalize()),
        }
    }
}

/// Writes the archive into `out` as it goes, in the zip crate's streaming mode (sizes and
/// CRCs go in data descriptors and the central directory, so `out` need not seek): each
/// table's rows as `rows` yields them, then the settings, then the manifest, whose sizes and
/// SHA-256 are counted while the entries are written. Only the current row is held.
pub fn write_stream<W: Write>(
    out: W,
    rows: impl IntoIterator<Item = DumpItem>,
    settings: &Map<String, Value>,
    schema_version: i64,
    backend: &str,
) -> std::io::Result<W> {
    let mut z = zip::ZipWriter::new_stream(out);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o600);
    let mut entries: Vec<EntryInfo> = Vec::new();
    let mut open: Option<Open> = None;
    let put = |z: &mut zip::ZipWriter<_>, o: &mut Open, b: &[u8]| {
        z.write_all(b)?;
        o.1 += b.len() as u64;
        o.2.update(b);
        Ok::<_, std::io::Error>(())
    };
    let start = |z: &mut zip::ZipWriter<_>, name: String| {
        z.start_file(name.as_str(), opts)
            .map_err(std::io::Error::other)?;
        Ok::<_, std::io::Error>(Open(name, 0, Sha256::new()))
    };
    for item in rows {
        match item {
            DumpItem::Table(t) => {
                entries.extend(open.take().map(Open::close));
                open = Some(start(&mut z, table_entry(t))?);
            }
            DumpItem::Row(r) => {
                let Some(o) = open.as_mut() else {
                    return Err(std::io::Error::other("a row came before its table"));
                };
                let mut line = serde_json::to_vec(&r)?;
                line.push(b'\n');
                put(&mut z, o, &line)?;
            }
        }
    }
    entries.extend(open.take().map(Open::close));
    let mut o = start(&mut z, SETTINGS.into())?;
    put(&mut z, &mut o, &serde_json::to_vec_pretty(settings)?)?;
    entries.push(o.close());
    let manifest = Manifest {
        format: FORMAT,
        weft_version: env!("CARGO_PKG_VERSION").into(),
        schema_version,
        backend: backend.into(),
        created_at: weft_storage::now(),
        entries,
    };
    z.start_file(MANIFEST, opts)
        .map_err(std::io::Error::other)?;
    z.write_all(&serde_json::to_vec_pretty(&manifest)?)?;
    Ok(z.finish().map_err(std::io::Error::other)?.into_inner())
}

/// [`write_stream`] into memory, from tables already read (what the tests below check).
#[cfg(test)]
pub fn write(
    tables: &BTreeMap<&'static str, Vec<Row>>,
    settings: &Map<String, Value>,
    schema_version: i64,
    backend: &str,
) -> std::io::Result<Vec<u8>> {
    let rows = tables.iter().flat_map(|(t, rows)| {
        std::iter::once(DumpItem::Table(t)).chain(rows.iter().cloned().map(DumpItem::Row))
    });
    write_stream(Vec::new(), rows, settings, schema_version, backend)
}

/// A name that could escape a folder or name something odd, with why.
fn unsafe_name(name: &str) -> Option<&'static str> {
    if name.starts_with('/') || name.get(1..2) == Some(":") {
        Some("an absolute path")
    } else if name.contains('\\') {
        Some("a backslash")
    } else if name.split('/').any(|s| s == "..") {
        Some("a parent folder (..)")
    } else if name.chars().any(char::is_control) {
        Some("a control character")
    } else {
        None
    }
}

/// A checked archive: the manifest and each table's rows.
pub struct Checked {
    pub manifest: Manifest,
    pub tables: BTreeMap<String, Vec<Row>>,
}

/// A source that counts the bytes read from it (shared, so the count can be read while the
/// zip reader owns the source).
pub struct Counting<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

impl<R: Seek> Seek for Counting<R> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(pos)
    }
}

/// Reads and checks an archive of `len` bytes completely (names, sizes, checksums, format,
/// rows). Nothing is written anywhere.
pub fn read<R: Read + Seek>(src: R, len: u64, schema_version: i64) -> Result<Checked, Refused> {
    let consumed = Rc::new(Cell::new(0u64));
    let src = Counting {
        inner: src,
        read: consumed.clone(),
    };
    let mut z = zip::ZipArchive::new(src)
        .map_err(|e| bad(format!("the upload is not a valid ZIP archive: {e}")))?;
    if z.len() > MAX_ENTRIES {
        return Err(too_big(format!(
            "the archive has {} entries; a backup has at most {MAX_ENTRIES}",
            z.len()
        )));
    }
    let expected: HashSet<String> = TABLES
        .iter()
        .map(|t| table_entry(t))
        .chain([MANIFEST.to_string(), SETTINGS.to_string()])
        .collect();
    let mut seen = HashSet::new();
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut total = 0u64;
    for i in 0..z.len() {
        let mut f = z
            .by_index(i)
            .map_err(|e| bad(format!("archive entry {i} cannot be read: {e}")))?;
        let name = f
            .name()
            .map_err(|e| bad(format!("archive entry {i} has an unreadable name: {e}")))?
            .to_string();
        if let Some(why) = unsafe_name(&name) {
            return Err(bad(format!("entry {name:?} has {why} in its name")));
        }
        if f.unix_mode().is_some_and(|m| m & 0o170000 == 0o120000) {
            return Err(bad(format!("entry {name:?} is a symbolic link")));
        }
        if !seen.insert(name.clone()) {
            return Err(bad(format!("entry {name:?} appears twice")));
        }
        if !expected.contains(&name) {
            return Err(bad(format!(
                "unexpected entry {name:?}: a backup holds manifest.json, settings.json and tables/<table>.jsonl"
            )));
        }
        // What this entry really took from the source, not what its header claims.
        let start = consumed.get();
        let packed = || (consumed.get() - start).clamp(1, len.max(1));
        let limit = MAX_ENTRY.min(MAX_TOTAL - total);
        let mut out = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        loop {
            let n = f
                .read(&mut buf)
                .map_err(|e| bad(format!("entry {name:?} cannot be inflated: {e}")))?;
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
            let got = out.len() as u64;
            if got > limit {
                return Err(too_big(format!(
                    "entry {name:?} inflates past {limit} bytes (at most {MAX_ENTRY} per entry, {MAX_TOTAL} in all)"
                )));
            }
            if got > RATIO_FLOOR && got / packed() > MAX_RATIO {
                return Err(too_big(format!(
                    "entry {name:?} inflates more than {MAX_RATIO} times its compressed size: refused as a zip bomb"
                )));
            }
        }
        total += out.len() as u64;
        files.insert(name, out);
    }
    let manifest: Manifest = match files.get(MANIFEST) {
        None => return Err(bad("the archive has no manifest.json: not a weft backup")),
        Some(b) => serde_json::from_slice(b)
            .map_err(|e| bad(format!("manifest.json is not a backup manifest: {e}")))?,
    };
    if manifest.format != FORMAT {
        return Err(unfit(format!(
            "backup format {} is not one this weft reads (it reads format {FORMAT})",
            manifest.format
        )));
    }
    if manifest.schema_version > schema_version {
        return Err(unfit(format!(
            "the backup comes from a newer schema (version {}; this weft has {schema_version}): restore it with that weft or newer",
            manifest.schema_version
        )));
    }
    check_listing(&manifest, &files)?;
    let mut tables = BTreeMap::new();
    for t in TABLES {
        let Some(b) = files.get(&table_entry(t)) else {
            continue;
        };
        tables.insert(t.to_string(), parse_rows(t, b)?);
    }
    if let Some(b) = files.get(SETTINGS) {
        serde_json::from_slice::<Map<String, Value>>(b)
            .map_err(|e| unfit(format!("settings.json is not a JSON object: {e}")))?;
    }
    Ok(Checked { manifest, tables })
}

/// The manifest lists exactly the other entries, with their sizes and checksums.
fn check_listing(m: &Manifest, files: &BTreeMap<String, Vec<u8>>) -> Result<(), Refused> {
    let mut listed = HashSet::new();
    for e in &m.entries {
        if !listed.insert(e.name.as_str()) {
            return Err(bad(format!("manifest.json lists {:?} twice", e.name)));
        }
        let Some(b) = files.get(&e.name) else {
            return Err(bad(format!(
                "manifest.json lists {:?}, which the archive lacks",
                e.name
            )));
        };
        if b.len() as u64 != e.size || sha256_hex(b) != e.sha256.to_ascii_lowercase() {
            return Err(bad(format!(
                "{:?} does not match its size and SHA-256 in manifest.json: the backup is damaged or was altered",
                e.name
            )));
        }
    }
    if let Some(n) = files
        .keys()
        .find(|n| *n != MANIFEST && !listed.contains(n.as_str()))
    {
        return Err(bad(format!("{n:?} is not listed in manifest.json")));
    }
    Ok(())
}

fn parse_rows(table: &str, b: &[u8]) -> Result<Vec<Row>, Refused> {
    let text =
        std::str::from_utf8(b).map_err(|_| unfit(format!("tables/{table}.jsonl is not UTF-8")))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str::<Row>(l).map_err(|e| {
                unfit(format!(
                    "tables/{table}.jsonl line {}: not a JSON object: {e}",
                    i + 1
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut t = BTreeMap::new();
        let row: Row =
            serde_json::from_str(r#"{"key":"seed","value":"1","updated_at":5}"#).unwrap();
        t.insert("settings", vec![row]);
        write(&t, &Map::new(), 1, "sqlite").unwrap()
    }

    #[test]
    fn round_trip() {
        let c = mem(&sample(), 1).map_err(|r| r.1).unwrap();
        assert_eq!(c.tables["settings"].len(), 1);
        assert_eq!(c.manifest.format, FORMAT);
        // A newer schema is refused.
        assert_eq!(mem(&sample(), 0).err().unwrap().0, 422);
    }

    #[test]
    fn names() {
        assert!(unsafe_name("../x").is_some());
        assert!(unsafe_name("tables/../../x").is_some());
        assert!(unsafe_name("/etc/passwd").is_some());
        assert!(unsafe_name("C:/x").is_some());
        assert!(unsafe_name("a\\b").is_some());
        assert!(unsafe_name("tables/audit.jsonl").is_none());
    }

    #[test]
    fn not_a_zip() {
        assert_eq!(mem(b"hello", 1).err().unwrap().0, 400);
    }

    fn mem(b: &[u8], schema: i64) -> Result<Checked, Refused> {
        read(std::io::Cursor::new(b), b.len() as u64, schema)
    }

    /// An entry of zeros whose headers claim it fills the archive (so its "ratio" looks
    /// tame) is stopped by the bytes really read, long before the size limit.
    #[test]
    fn a_lying_header_does_not_buy_room() {
        let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let deflated = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        z.start_file("settings.json", deflated).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..300 {
            z.write_all(&zeros).unwrap();
        }
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        z.start_file("manifest.json", stored).unwrap();
        let mut noise = vec![0u8; 8 << 20];
        let mut x = 0x9e3779b97f4a7c15u64;
        for b in noise.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        z.write_all(&noise).unwrap();
        let mut bytes = z.finish().unwrap().into_inner();
        let claim = (bytes.len() - 200) as u32;
        lie_about_compressed_size(&mut bytes, claim);
        let err = mem(&bytes, 1).err().unwrap();
        assert_eq!(err.0, 413, "{}", err.1);
        assert!(err.1.contains("times its compressed size"), "{}", err.1);
    }

    /// Sets the compressed size of the first entry in its local and central headers.
    fn lie_about_compressed_size(zip: &mut [u8], claim: u32) {
        let local = 0;
        zip[local + 18..local + 22].copy_from_slice(&claim.to_le_bytes());
        // The central directory's offset is in the end record (the last 22 bytes: no comment).
        let end = zip.len() - 22;
        let central = u32::from_le_bytes(zip[end + 16..end + 20].try_into().unwrap()) as usize;
        zip[central + 20..central + 24].copy_from_slice(&claim.to_le_bytes());
    }
}
