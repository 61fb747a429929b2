//! Bounded everything (issue item 8; review failures 5 and 7): a huge non-file multipart
//! field, too many files in one upload, a restore archive whose headers lie, skill zips (a
//! bomb; `a` beside `a/b`), anonymous requests with 7 KB paths against the audit log, and the
//! modes of the database and `WEFT_HOME`. Memory is judged by the server's peak resident size
//! (`VmHWM` in /proc), before and after the attack.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::json;
use weft_tests::{send, Response, Server};

use crate::harness::{call, Backend, Db};
use crate::on_both;

/// Most the server's peak resident size may grow during one attack.
const RSS_BOUND: u64 = 64 << 20;
const BOUNDARY: &str = "weftbounds5c1e";

/// A /proc/<pid>/status field in bytes (`VmHWM`: the peak resident size).
fn proc_status(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb << 10
}

fn peak(s: &Server) -> u64 {
    proc_status(s.pid(), "VmHWM:")
}

/// The peak grew by less than [`RSS_BOUND`] since `before`.
fn assert_bounded(s: &Server, before: u64, what: &str) {
    let grew = peak(s).saturating_sub(before);
    assert!(
        grew < RSS_BOUND,
        "{what}: the server's peak RSS grew by {} MiB",
        grew >> 20
    );
}

/// A multipart part's head.
fn part_head(name: &str, file: Option<&str>) -> Vec<u8> {
    let disp = match file {
        Some(f) => format!("form-data; name=\"{name}\"; filename=\"{f}\""),
        None => format!("form-data; name=\"{name}\""),
    };
    format!("--{BOUNDARY}\r\nContent-Disposition: {disp}\r\n\r\n").into_bytes()
}

fn form_end() -> Vec<u8> {
    format!("\r\n--{BOUNDARY}--\r\n").into_bytes()
}

/// Sends a request whose body comes in `chunks` (written from another thread, which stops at
/// the first write error) and reads the response meanwhile: the server may answer, and
/// close, long before the body ends.
fn streamed(
    s: &Server,
    path: &str,
    content_type: &str,
    len: u64,
    chunks: impl Iterator<Item = Vec<u8>> + Send + 'static,
) -> Response {
    let mut conn = s.connect().unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: {content_type}\r\nContent-Length: {len}\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).unwrap();
    let mut writer: TcpStream = conn.try_clone().unwrap();
    let t = std::thread::spawn(move || {
        for c in chunks {
            if writer.write_all(&c).is_err() {
                return;
            }
        }
    });
    conn.set_read_timeout(Some(Duration::from_secs(300)))
        .unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 << 10];
    loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let _ = conn.shutdown(std::net::Shutdown::Both);
    let _ = t.join();
    assert!(
        raw.windows(4).any(|w| w == b"\r\n\r\n"),
        "no response to the streamed request: {:?}",
        String::from_utf8_lossy(&raw)
    );
    Response::parse(&raw)
}

/// A 400 MiB multipart field named `name`, streamed, after one small file.
fn huge_field(s: &Server, name: &'static str) -> Response {
    const FIELD: u64 = 400 << 20;
    const CHUNK: usize = 1 << 20;
    let mut start = part_head("file", Some("a.txt"));
    start.extend_from_slice(b"hello\r\n");
    start.extend_from_slice(&part_head(name, None));
    let end = form_end();
    let len = start.len() as u64 + FIELD + end.len() as u64;
    let body = std::iter::once(start)
        .chain((0..FIELD / CHUNK as u64).map(|_| vec![b'x'; CHUNK]))
        .chain(std::iter::once(end));
    streamed(
        s,
        "/api/upload",
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        len,
        body,
    )
}

/// A 400 MiB `sessionId` (or any other non-file field) is refused as it arrives: 413, and
/// the server's memory does not follow the field.
#[test]
fn a_huge_text_field_is_refused_without_buffering() {
    let Some(db) = Db::new(Backend::Sqlite, "bounds-field") else {
        return;
    };
    let s = db.serve(&[]);
    for name in ["sessionId", "notes"] {
        let before = peak(&s);
        let r = huge_field(&s, name);
        assert_eq!(r.status, 413, "{name}: {}", r.body);
        assert!(r.body.contains(name), "{name}: {}", r.body);
        assert_bounded(&s, before, name);
    }
    // The upload route still works for a normal form.
    let mut body = part_head("file", Some("ok.txt"));
    body.extend_from_slice(b"fine");
    body.extend_from_slice(&form_end());
    let r = multipart(&s, &body);
    assert_eq!(r.status, 200, "{}", r.body);
}

fn multipart(s: &Server, body: &[u8]) -> Response {
    let mut c = s.connect().unwrap();
    let ct = format!("multipart/form-data; boundary={BOUNDARY}");
    send(
        &mut c,
        "POST",
        "/api/upload",
        Some(body),
        &[("Content-Type", &ct)],
    )
    .unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    Response::parse(&raw)
}

/// Files under a folder, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// 3000 files in one upload: refused (413) and none stored; the limit is a flag.
#[test]
fn too_many_files_in_one_upload_store_nothing() {
    let Some(db) = Db::new(Backend::Sqlite, "bounds-files") else {
        return;
    };
    let up = db.home.join("up");
    let s = db.serve(&[
        "--uploads-dir",
        &up.display().to_string(),
        "--upload-max-files",
        "8",
    ]);
    let form = |n: usize| {
        let mut body = Vec::new();
        for i in 0..n {
            body.extend_from_slice(&part_head("file", Some(&format!("f{i}.txt"))));
            body.extend_from_slice(format!("file {i}\r\n").as_bytes());
        }
        body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
        body
    };
    let r = multipart(&s, &form(3000));
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(r.body.contains("at most 8 files"), "{}", r.body);
    assert!(files_under(&up).is_empty(), "{:?}", files_under(&up));
    let r = multipart(&s, &form(9));
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(files_under(&up).is_empty(), "{:?}", files_under(&up));
    // At the limit, all are stored.
    let r = multipart(&s, &form(8));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["files"].as_array().unwrap().len(), 8);
}

/// A zip with one deflated entry of `zeros` MiB of zeros named `bomb`, then a stored entry
/// of `noise` MiB of random bytes named `pad` (which makes the archive big enough that a
/// lie about the first entry's compressed size looks plausible).
fn lying_zip(bomb: &str, zeros: usize, pad: &str, noise: usize) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let deflated = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    z.start_file(bomb, deflated).unwrap();
    let mib = vec![0u8; 1 << 20];
    for _ in 0..zeros {
        z.write_all(&mib).unwrap();
    }
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    z.start_file(pad, stored).unwrap();
    let mut x = 0x2545f4914f6cdd1du64;
    let mut block = vec![0u8; 1 << 20];
    for _ in 0..noise {
        for b in block.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        z.write_all(&block).unwrap();
    }
    let mut bytes = z.finish().unwrap().into_inner();
    // The first entry's headers claim it takes nearly the whole archive.
    let claim = (bytes.len() - 4096) as u32;
    bytes[18..22].copy_from_slice(&claim.to_le_bytes());
    let end = bytes.len() - 22;
    let central = u32::from_le_bytes(bytes[end + 16..end + 20].try_into().unwrap()) as usize;
    bytes[central + 20..central + 24].copy_from_slice(&claim.to_le_bytes());
    bytes
}

fn post_bytes(s: &Server, key: &str, path: &str, ct: &str, body: &[u8]) -> Response {
    let mut c = s.connect().unwrap();
    let auth = format!("Bearer {key}");
    let mut headers = vec![("Content-Type", ct)];
    if !key.is_empty() {
        headers.push(("Authorization", auth.as_str()));
    }
    send(&mut c, "POST", path, Some(body), &headers).unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    Response::parse(&raw)
}

/// A restore archive whose entry claims a compressed size of ~40 MiB while holding 300 MiB of
/// zeros in a few hundred KiB: refused as a bomb (413) by the bytes really read, and the
/// server's peak memory stays within the bound. Nothing is restored.
fn lying_restore(db: &Db) {
    let s = db.serve(&[]);
    let zip = lying_zip("settings.json", 300, "manifest.json", 40);
    let before = peak(&s);
    let r = post_bytes(&s, "", "/api/v1/backup/restore", "application/zip", &zip);
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(r.body.contains("compressed size"), "{}", r.body);
    assert_bounded(&s, before, "restore");
    assert_eq!(call(&s.client(), "", "GET", "/health", None).status, 200);
}
on_both!(lying_restore, lying_restore_sqlite, lying_restore_postgres);

fn skill_zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, body) in entries {
        w.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(body).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn skill_upload(s: &Server, zip: &[u8]) -> Response {
    let mut body = part_head("file", Some("s.zip"));
    body.extend_from_slice(zip);
    body.extend_from_slice(&form_end());
    post_bytes(
        s,
        "",
        "/api/skills",
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        &body,
    )
}

/// A skill zip holding a file `a` and a file `a/b` (a 500 naming the server's folders
/// before), and a bomb: each a 4xx with a message and no path.
#[test]
fn bad_skill_zips_are_4xx_without_paths() {
    let Some(db) = Db::new(Backend::Sqlite, "bounds-skills") else {
        return;
    };
    let s = db.serve(&[]);
    let md = b"---\nname: clash\ndescription: Two entries clash.\n---\n# clash\n".as_slice();
    let home = db.home.display().to_string();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            skill_zip(&[("SKILL.md", md), ("a", b"file"), ("a/b", b"file")]),
            "other entries use it as a folder",
        ),
        (
            {
                let zeros = vec![0u8; 32 << 20];
                skill_zip(&[("SKILL.md", md), ("zeros.bin", &zeros)])
            },
            "zip bomb",
        ),
    ];
    for (zip, want) in cases {
        let before = peak(&s);
        let r = skill_upload(&s, &zip);
        assert!(
            (400..500).contains(&r.status),
            "{want}: {} {}",
            r.status,
            r.body
        );
        assert!(r.body.contains(want), "{want}: {}", r.body);
        assert!(
            !r.body.contains(&home) && !r.body.contains("/tmp"),
            "{}",
            r.body
        );
        assert_bounded(&s, before, want);
    }
    assert!(!db.home.join("skills/clash").exists());
}

/// Anonymous POSTs to `/api/v1/<7 KB>` write no audit rows (they are counted on /metrics);
/// an admin's request to such a path is audited with the path cut short; the retention
/// setting prunes the log.
fn audit_is_bounded(db: &Db) {
    let admin = db.cli_key("admin");
    let s = db.serve(&[]);
    let c = s.client();
    let long = format!("/api/v1/{}", "x".repeat(7 << 10));
    let long_key = format!("/api/v1/keys/{}", "x".repeat(7 << 10));
    for _ in 0..40 {
        // The review's attack: a path no route serves is a public 404, before any key is
        // asked for, and writes nothing.
        let r = call(&c, "", "POST", &long, Some("{}"));
        assert_eq!(r.status, 404, "{}", r.body);
        // A real admin route without a key, or with a bad one: refused, counted, no row.
        let r = call(&c, "", "DELETE", &long_key, None);
        assert_eq!(r.status, 401, "{}", r.body);
        let r = call(&c, "weft_not-a-key", "DELETE", &long_key, None);
        assert_eq!(r.status, 401, "{}", r.body);
    }
    let rows = || {
        let r = call(&c, &admin, "GET", "/api/v1/audit?limit=1000", None);
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["data"].as_array().unwrap().clone()
    };
    let all = rows();
    assert!(
        all.iter()
            .all(|r| r["actor"] != "unauthenticated" && r["status"] != 401),
        "{all:?}"
    );
    let m = call(&c, &admin, "GET", "/metrics", None).body;
    let denied: f64 = m
        .lines()
        .find_map(|l| l.strip_prefix("weft:auth_denied_total{status=\"401\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no 401 counter: {m}"));
    assert!(denied >= 80.0, "{denied}");
    // The admin's own change on a long path is a row, its route cut short.
    let r = call(&c, &admin, "DELETE", &long_key, None);
    assert!((400..500).contains(&r.status), "{}", r.body);
    let all = rows();
    let row = all
        .iter()
        .find(|r| {
            r["route"]
                .as_str()
                .is_some_and(|p| p.starts_with("/api/v1/keys/xxx"))
        })
        .unwrap_or_else(|| panic!("no row for the admin's request: {all:?}"));
    assert!(row["route"].as_str().unwrap().len() <= 260, "{row}");
    // Retention: a few admin changes, then keep 3 rows.
    for i in 0..5 {
        let body = json!({"name": format!("k{i}"), "role": "user"}).to_string();
        assert_eq!(
            call(&c, &admin, "POST", "/api/v1/keys", Some(&body)).status,
            201
        );
    }
    assert!(rows().len() >= 6);
    let r = call(
        &c,
        &admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"audit_retention_rows": 3}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // The 3 kept plus the settings change itself (written after the pruning).
    let left = rows();
    assert!(left.len() <= 4, "{left:?}");
    let r = call(
        &c,
        &admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"audit_retention_rows": -1}"#),
    );
    assert_eq!(r.status, 400, "{}", r.body);
}
on_both!(
    audit_is_bounded,
    audit_is_bounded_sqlite,
    audit_is_bounded_postgres
);

/// `WEFT_HOME` is 0700 (even when it existed 0755), `weft.db` and its WAL and SHM 0600.
#[test]
fn database_and_home_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let Some(db) = Db::new(Backend::Sqlite, "bounds-modes") else {
        return;
    };
    std::fs::set_permissions(&db.home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let admin = db.cli_key("admin");
    let s = db.serve(&[]);
    // A write, so the WAL has something in it.
    let body = json!({"name": "m", "role": "user"}).to_string();
    assert_eq!(
        call(&s.client(), &admin, "POST", "/api/v1/keys", Some(&body)).status,
        201
    );
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&db.home), 0o700, "WEFT_HOME");
    for f in ["weft.db", "weft.db-wal", "weft.db-shm"] {
        let p = db.home.join(f);
        assert!(p.exists(), "{f} missing");
        assert_eq!(mode(&p), 0o600, "{f}");
    }
}
