//! `POST /api/upload` and `GET /uploads/{name}` on the real `weft serve`: text and PDF text
//! extraction with page markers, a PDF without a text layer, a table of bad inputs (limits,
//! executables, archives, corrupt and hostile PDFs, unknown sessions) answered with clear 4xx,
//! names that try to leave the uploads folder, per-session ownership, removal with the session,
//! and one chat-UI request whose answer uses an uploaded file.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use weft_core::test_support::model_path;
use weft_tests::{send, Response, Server};

const BOUNDARY: &str = "weft-test-boundary-7f3a";

/// A multipart body: (field name, file name, bytes).
fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut b = Vec::new();
    for (name, file, bytes) in parts {
        b.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        match file {
            Some(f) => b.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{f}\"\r\n\
                     Content-Type: application/octet-stream\r\n\r\n"
                )
                .as_bytes(),
            ),
            None => b.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        b.extend_from_slice(bytes);
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    b
}

fn post_form(server: &Server, path: &str, body: &[u8]) -> Response {
    let mut s = server.connect().unwrap();
    let ctype = format!("multipart/form-data; boundary={BOUNDARY}");
    // The server may answer (413) before reading all of a large body and close: a failed
    // write is then expected, and the answer is still there to read.
    let _ = send(
        &mut s,
        "POST",
        path,
        Some(body),
        &[("Content-Type", &ctype)],
    );
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    Response::parse(&raw)
}

fn upload(server: &Server, sid: &str, files: &[(&str, &[u8])]) -> Response {
    let mut parts: Vec<(&str, Option<&str>, &[u8])> = vec![("sessionId", None, sid.as_bytes())];
    parts.extend(files.iter().map(|(n, b)| ("file", Some(*n), *b)));
    post_form(server, "/api/upload", &multipart(&parts))
}

/// A PDF with one page per entry, each page's text drawn in Helvetica (`|` starts a new line);
/// an empty entry is a page
/// that only draws a line (no text layer). Written by hand with a correct cross-reference table.
fn pdf(pages: &[&str]) -> Vec<u8> {
    let n = pages.len();
    // Objects: 1 catalog, 2 page tree, 3 font, then per page: page, contents.
    let mut objects: Vec<String> = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".into(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {n} >>",
            (0..n)
                .map(|i| format!("{} 0 R", 4 + 2 * i))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into(),
    ];
    for (i, text) in pages.iter().enumerate() {
        let content = if text.is_empty() {
            "0 0 m 200 200 l S".to_string()
        } else {
            // Lines after the first (split at '|') are moved down with `Td`.
            let lines: Vec<String> = text.split('|').map(|l| format!("({l}) Tj")).collect();
            format!("BT /F1 14 Tf 72 720 Td {} ET", lines.join(" 0 -20 Td "))
        };
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            5 + 2 * i
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ));
    }
    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
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

fn new_session(server: &Server) -> String {
    let r = server.request("POST", "/api/sessions", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["sessionId"].as_str().unwrap().to_string()
}

fn error_of(r: &Response) -> String {
    r.json()["error"].as_str().unwrap_or_default().to_string()
}

#[test]
fn uploads_text_pdf_limits_ownership_and_chat() {
    let Some(model) = model_path("qwen2") else {
        return;
    };
    let root = std::env::temp_dir().join(format!("weft-uploads-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let home = root.join("home");
    let dir = root.join("up");
    std::fs::create_dir_all(&home).unwrap();
    let server = Server::start_env(
        &[
            "--model".into(),
            model.display().to_string(),
            "--ctx".into(),
            "2048".into(),
            "--parallel".into(),
            "1".into(),
            "--uploads-dir".into(),
            dir.display().to_string(),
            "--upload-max-file".into(),
            "1MiB".into(),
            "--upload-max-request".into(),
            "3MiB".into(),
        ],
        &[("WEFT_HOME", &home)],
    );
    let a = new_session(&server);
    let b = new_session(&server);

    // Text: stored under a random name, its text returned.
    let r = upload(&server, &a, &[("notes.md", b"# Notes\nalpha beta\n")]);
    assert_eq!(r.status, 200, "{}", r.body);
    let t = r.json();
    assert_eq!(t["ok"], true);
    assert_eq!(t["kind"], "text");
    assert_eq!(t["mediaType"], "text");
    assert_eq!(t["fileName"], "notes.md");
    assert_eq!(t["textContent"], "# Notes\nalpha beta\n");
    assert_eq!(t["textLength"], 19);
    let text_name = t["file"].as_str().unwrap().to_string();
    assert!(
        text_name.ends_with(".md") && text_name.len() == 35,
        "{text_name}"
    );
    assert_eq!(t["files"].as_array().unwrap().len(), 1);

    // A two-page PDF with a text layer (session given as a query parameter this time).
    let two = pdf(&[
        "Quarterly report: revenue grew|by ten percent",
        "Second page says goodbye",
    ]);
    let r = post_form(
        &server,
        &format!("/api/upload?sessionId={a}"),
        &multipart(&[("file", Some("report.pdf"), &two)]),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let p = r.json();
    assert_eq!(p["kind"], "pdf");
    assert_eq!(p["pageCount"], 2);
    assert_eq!(p["extractedPageCount"], 2);
    assert_eq!(p["renderedAsImages"], false);
    assert!(p.get("needsVision").is_none(), "{p}");
    let text = p["textContent"].as_str().unwrap();
    let (one, rest) = text.split_once("[Page 2]").expect("a [Page 2] marker");
    assert!(one.starts_with("[Page 1]"), "{text}");
    assert!(
        one.contains("Quarterly report: revenue grew\nby ten percent"),
        "{text}"
    );
    assert!(rest.contains("Second page says goodbye"), "{text}");
    let pdf_name = p["file"].as_str().unwrap().to_string();

    // A PDF whose only page has no text: the reply says a vision model would be needed.
    let r = upload(&server, &a, &[("scan.pdf", &pdf(&[""]))]);
    assert_eq!(r.status, 200, "{}", r.body);
    let s = r.json();
    assert_eq!(s["needsVision"], true, "{s}");
    assert!(
        s["warning"].as_str().unwrap().contains("no text layer"),
        "{s}"
    );
    assert!(s["textContent"].is_null(), "{s}");

    // Several files at once: a `files` array, the first file's fields at the top.
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";
    let r = upload(&server, &a, &[("a.csv", b"x,y\n1,2\n"), ("pic.png", png)]);
    assert_eq!(r.status, 200, "{}", r.body);
    let m = r.json();
    let files = m["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(m["file"], files[0]["file"]);
    assert_eq!(files[0]["kind"], "text");
    assert!(files[0]["file"].as_str().unwrap().ends_with(".csv"));
    assert_eq!(files[1]["kind"], "image");
    assert_eq!(files[1]["contentType"], "image/png");

    // Bad input: each a clear 4xx with a message, nothing stored.
    let before = files_under(&dir).len();
    let big = vec![b'a'; (1 << 20) + 1];
    let near = vec![b'b'; 900 << 10];
    let mut elf = b"\x7fELF\x02\x01\x01\0".to_vec();
    elf.extend_from_slice(&[0u8; 64]);
    let deep = format!(
        "%PDF-1.4\n1 0 obj\n{}\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n",
        "[".repeat(100_000)
    );
    let huge_len =
        "%PDF-1.4\n1 0 obj\n<< /Length 999999999999 >>\nstream\nabc\nendstream\nendobj\n\
                    trailer\n<< /Root 1 0 R >>\n%%EOF\n";
    let no_end = "%PDF-1.4\n1 0 obj\n<< /Length 3 >>\nstream\nabc";
    // 512 MiB of zeros compress to about half a MiB: under the file limit, over the server's
    // inflate budget.
    let mut bomb_pdf = b"%PDF-1.4\n1 0 obj\n<< /Filter /FlateDecode >>\nstream\n".to_vec();
    {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 16 << 20];
        for _ in 0..32 {
            z.write_all(&zeros).unwrap();
        }
        bomb_pdf.extend_from_slice(&z.finish().unwrap());
    }
    bomb_pdf.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8 | 0x80)
        .collect();
    // (what, files, status, a word the message has)
    type Case<'a> = (&'a str, Vec<(&'a str, Vec<u8>)>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            "over the file limit",
            vec![("big.txt", big)],
            413,
            "upload-max-file",
        ),
        (
            "over the request limit",
            vec![
                ("1.txt", near.clone()),
                ("2.txt", near.clone()),
                ("3.txt", near.clone()),
                ("4.txt", near.clone()),
            ],
            413,
            "upload-max-request",
        ),
        (
            "an executable named .pdf",
            vec![("report.pdf", elf)],
            415,
            "executable",
        ),
        (
            "a zip",
            vec![("a.txt", b"PK\x03\x04\x14\0\0\0".to_vec())],
            415,
            "zip",
        ),
        ("binary garbage", vec![("a.txt", garbage)], 415, "neither"),
        (
            "a corrupt PDF",
            vec![("c.pdf", b"%PDF-1.7\nthis is not a pdf".to_vec())],
            422,
            "PDF",
        ),
        (
            "deeply nested objects",
            vec![("d.pdf", deep.into_bytes())],
            422,
            "nests",
        ),
        (
            "a huge declared stream",
            vec![("h.pdf", huge_len.as_bytes().to_vec())],
            422,
            "Length",
        ),
        (
            "a stream without end",
            vec![("e.pdf", no_end.as_bytes().to_vec())],
            422,
            "endstream",
        ),
        (
            "a decompression bomb",
            vec![("b.pdf", bomb_pdf)],
            413,
            "expand",
        ),
    ];
    for (what, files, status, needle) in &cases {
        let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        let r = upload(&server, &a, &refs);
        assert_eq!(r.status, *status, "{what}: {}", r.body);
        let e = error_of(&r);
        assert!(
            e.contains(needle),
            "{what}: the message {e:?} should mention {needle:?}"
        );
    }
    let r = upload(&server, &a, &[]);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(error_of(&r).contains("file"));
    let r = upload(&server, "no-such-session", &[("a.txt", b"hi")]);
    assert_eq!(r.status, 404, "{}", r.body);
    let r = server.request("POST", "/api/upload", Some("{}"));
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        files_under(&dir).len(),
        before,
        "a refused upload stored something"
    );

    // A name that tries to leave the folder: only its last part is kept, as a display name;
    // the file is stored under a random name inside the uploads folder.
    let r = upload(&server, &a, &[("../../escape.txt", b"outside?")]);
    assert_eq!(r.status, 200, "{}", r.body);
    let e = r.json();
    assert_eq!(e["fileName"], "escape.txt");
    assert!(!e["file"].as_str().unwrap().contains("escape"));
    for f in files_under(&root) {
        assert!(
            f.starts_with(&dir) || f.starts_with(&home),
            "{} outside",
            f.display()
        );
        assert!(!f.to_string_lossy().contains("escape"), "{}", f.display());
    }
    assert!(!root.join("escape.txt").exists() && !dir.join("escape.txt").exists());

    // Downloads: the owner session only, with nosniff; bad names are 400.
    let r = server.request("GET", &format!("/uploads/{text_name}?sessionId={a}"), None);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, "# Notes\nalpha beta\n");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    let url = t["url"].as_str().unwrap();
    assert_eq!(server.request("GET", url, None).status, 200, "{url}");
    for other in [format!("?sessionId={b}"), String::new()] {
        let r = server.request("GET", &format!("/uploads/{text_name}{other}"), None);
        assert_eq!(r.status, 404, "another session read the file: {}", r.body);
    }
    for bad in [
        "/uploads/..%2F..%2Fetc%2Fpasswd",
        "/uploads/%2e%2e",
        "/uploads/..%5Cx.txt",
        &format!("/uploads/{pdf_name}.txt?sessionId={a}"),
        &format!("/uploads/{text_name}.json?sessionId={a}"),
    ] {
        let r = server.request("GET", bad, None);
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }

    // The chat: a file's text is used by the model; images are refused (no vision here).
    let c = new_session(&server);
    let r = upload(
        &server,
        &c,
        &[("secret.txt", b"The secret word is PAPAYA.\n")],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let secret = r.json()["file"].as_str().unwrap().to_string();
    let r = upload(&server, &c, &[("pic.png", png)]);
    let pic = r.json()["file"].as_str().unwrap().to_string();
    let ask = |extra: Value| {
        let mut body = json!({
            "sessionId": c, "maxTokens": 12, "temperature": 0,
            "messages": [{"role": "user",
                          "content": "What is the secret word in the file? Reply with the word only."}]
        });
        for (k, v) in extra.as_object().unwrap() {
            body["messages"][0][k] = v.clone();
        }
        server.request("POST", "/api/ui/chat", Some(&body.to_string()))
    };
    let r = ask(json!({"imagePaths": [pic]}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        error_of(&r).contains("does not accept images"),
        "{}",
        r.body
    );
    let r = ask(json!({"textFilePaths": ["0123456789abcdef0123456789abcdef.txt"]}));
    assert_eq!(r.status, 400, "{}", r.body);
    let r = ask(json!({"textFilePaths": [secret]}));
    assert_eq!(r.status, 200, "{}", r.body);
    let mut answer = String::new();
    for d in r.sse_data() {
        let f: Value = serde_json::from_str(&d).unwrap();
        if let Some(t) = f["token"].as_str() {
            answer.push_str(t);
        }
        if f["done"] == true {
            assert!(f["error"].is_null(), "{f}");
        }
    }
    assert!(
        answer.to_uppercase().contains("PAPAYA"),
        "the answer {answer:?} misses the file"
    );
    // The session now holds the question with the file inlined.
    let h = server
        .request("GET", &format!("/api/sessions/{c}"), None)
        .json();
    let first = h["messages"][0]["content"].as_str().unwrap();
    assert!(
        first.starts_with("[File: secret.txt]\nThe secret word is PAPAYA.\n[End of file]"),
        "{first}"
    );

    // Deleting a session deletes its files.
    assert_eq!(
        server
            .request("DELETE", &format!("/api/sessions/{a}"), None)
            .status,
        200
    );
    let mut gone = false;
    for _ in 0..100 {
        let r = server.request("GET", &format!("/uploads/{text_name}?sessionId={a}"), None);
        if r.status == 404 {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(gone, "the deleted session's file is still served");
    assert!(files_under(&dir)
        .iter()
        .all(|f| !f.to_string_lossy().contains(&text_name)));
    assert_eq!(server.request("GET", "/health", None).status, 200);
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
}
