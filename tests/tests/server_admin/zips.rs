//! Backup ZIPs for the restore tests: reading a real backup's tables, and building archives
//! by hand (well-formed, malicious, or both) with the same `zip` crate the server reads with.

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use weft_tests::{send, Client, Response};
use zip::write::SimpleFileOptions;

/// A request with a bytes body (`ctype`), read back with its body as bytes; write errors
/// are ignored (a server may answer 413 and close before reading a large body).
pub fn raw(
    c: &Client,
    key: &str,
    method: &str,
    path: &str,
    body: Option<(&[u8], &str)>,
) -> (Response, Vec<u8>) {
    let mut s = c.connect().expect("connecting");
    let auth = format!("Bearer {key}");
    let mut headers = vec![("Authorization", auth.as_str())];
    if let Some((_, ct)) = body {
        headers.push(("Content-Type", ct));
    }
    let _ = send(&mut s, method, path, body.map(|b| b.0), &headers);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{method} {path}: no response ({} bytes)", out.len()));
    (Response::parse(&out), out[split + 4..].to_vec())
}

/// `POST /api/v1/backup/restore` with a raw application/zip body.
pub fn restore(c: &Client, key: &str, zip: &[u8]) -> Response {
    raw(
        c,
        key,
        "POST",
        "/api/v1/backup/restore",
        Some((zip, "application/zip")),
    )
    .0
}

/// The same as a multipart form with the archive in field `field`.
pub fn restore_multipart(c: &Client, key: &str, zip: &[u8], field: &str) -> Response {
    let boundary = "weft-test-boundary-7d1f";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"b.zip\"\r\nContent-Type: application/zip\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(zip);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let ct = format!("multipart/form-data; boundary={boundary}");
    raw(c, key, "POST", "/api/v1/backup/restore", Some((&body, &ct))).0
}

/// `GET /api/v1/backup`: the archive.
pub fn backup(c: &Client, key: &str) -> Vec<u8> {
    let (r, b) = raw(c, key, "GET", "/api/v1/backup", None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/zip"));
    // Streamed as it is written, not built in memory first: no length is known up front.
    assert_eq!(
        r.header("transfer-encoding"),
        Some("chunked"),
        "{:?}",
        r.headers
    );
    assert_eq!(r.header("content-length"), None);
    b
}

/// Every entry of an archive: name → bytes.
pub fn entries(zip: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let mut z = zip::ZipArchive::new(Cursor::new(zip)).expect("a ZIP");
    let mut out = BTreeMap::new();
    for i in 0..z.len() {
        let mut f = z.by_index(i).unwrap();
        let name = f.name().unwrap().to_string();
        let mut b = Vec::new();
        f.read_to_end(&mut b).unwrap();
        out.insert(name, b);
    }
    out
}

/// A backup's tables: table → rows.
pub fn tables(zip: &[u8]) -> BTreeMap<String, Vec<Value>> {
    entries(zip)
        .into_iter()
        .filter_map(|(n, b)| {
            let t = n
                .strip_prefix("tables/")?
                .strip_suffix(".jsonl")?
                .to_string();
            let rows = String::from_utf8(b)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            Some((t, rows))
        })
        .collect()
}

/// A ZIP of `files` as given (names unchecked).
pub fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (n, b) in files {
        z.start_file(*n, opts).unwrap();
        z.write_all(b).unwrap();
    }
    z.finish().unwrap().into_inner()
}

/// A manifest listing `files` with their true sizes and checksums.
pub fn manifest(format: u32, files: &[(&str, &[u8])]) -> Vec<u8> {
    let entries: Vec<Value> = files
        .iter()
        .map(|(n, b)| {
            let sha: String = Sha256::digest(b)
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect();
            json!({"name": n, "size": b.len(), "sha256": sha})
        })
        .collect();
    serde_json::to_vec(
        &json!({"format": format, "weft_version": "0", "schema_version": 1,
        "backend": "sqlite", "created_at": 0, "entries": entries}),
    )
    .unwrap()
}

/// A well-formed archive of `files` plus their manifest.
pub fn signed(format: u32, files: &[(&str, &[u8])]) -> Vec<u8> {
    let m = manifest(format, files);
    let mut all = files.to_vec();
    all.push(("manifest.json", &m));
    zip_of(&all)
}

/// A symlink entry named `name` pointing at `target`.
pub fn with_symlink(name: &str, target: &str) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
    z.add_symlink(name, target, SimpleFileOptions::default())
        .unwrap();
    z.start_file("manifest.json", SimpleFileOptions::default())
        .unwrap();
    z.write_all(&manifest(1, &[])).unwrap();
    z.finish().unwrap().into_inner()
}

/// A zip bomb: `tables/audit.jsonl` inflating to 1 GiB of zeros (about 1 MiB packed).
pub fn bomb() -> Vec<u8> {
    let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(true);
    z.start_file("tables/audit.jsonl", opts).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..1024 {
        z.write_all(&zeros).unwrap();
    }
    z.finish().unwrap().into_inner()
}
