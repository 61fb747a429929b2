//! A scanned PDF (no text layer) uploaded to `weft serve`: with a vision model served (Gemma 3
//! 270M and the tiny Gemma 3 projector of tests/data/vision/gemma3) its first `--pdf-max-pages`
//! pages come back as PNG image uploads of the session (`renderedAsImages`, `frames`,
//! `frameUrls`), which the chat reads as `imagePaths`; a PDF hiding a huge image is refused
//! from its dictionary; without a vision model the reply keeps `needsVision` and its warning.
//!
//! tests/data/media/scan3.pdf: three US Letter pages, each one embedded PNG (see media/tests).

use std::io::Read;
use std::path::PathBuf;

use serde_json::{json, Value};
use weft_core::test_support::model_path;
use weft_tests::{send, Response, Server};

const BOUNDARY: &str = "weft-scan-boundary-41c9";

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join(rel)
}

fn scan3() -> Vec<u8> {
    std::fs::read(data("media/scan3.pdf")).unwrap()
}

/// A multipart form with `sessionId` and one file.
fn form(sid: &str, name: &str, bytes: &[u8]) -> Vec<u8> {
    let mut b = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"sessionId\"\r\n\r\n{sid}\r\n\
         --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
         Content-Type: application/pdf\r\n\r\n"
    )
    .into_bytes();
    b.extend_from_slice(bytes);
    b.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    b
}

/// The raw response (head and body bytes) of a request.
fn raw(server: &Server, method: &str, path: &str, body: Option<&[u8]>, ctype: &str) -> Vec<u8> {
    let mut s = server.connect().unwrap();
    send(&mut s, method, path, body, &[("Content-Type", ctype)]).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

fn upload(server: &Server, sid: &str, name: &str, bytes: &[u8]) -> Response {
    let ctype = format!("multipart/form-data; boundary={BOUNDARY}");
    let body = form(sid, name, bytes);
    Response::parse(&raw(server, "POST", "/api/upload", Some(&body), &ctype))
}

fn new_session(server: &Server) -> String {
    let r = server.request("POST", "/api/sessions", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["sessionId"].as_str().unwrap().to_string()
}

/// A one-page PDF without text whose only image declares `side` x `side` pixels (its data is
/// three bytes: the dictionary alone must refuse it). Hand-written with a correct xref table.
fn pdf_with_image(side: u32) -> Vec<u8> {
    let content = "q 612 0 0 792 0 0 cm /Im1 Do Q";
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
         /Resources << /XObject << /Im1 5 0 R >> >> /Contents 4 0 R >>"
            .to_string(),
        format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ),
        format!(
            "<< /Type /XObject /Subtype /Image /Width {side} /Height {side} \
             /ColorSpace /DeviceRGB /BitsPerComponent 8 /Length 3 >>\nstream\nabc\nendstream"
        ),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
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

/// Width and height from a PNG's IHDR.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

fn body_of(raw: &[u8]) -> &[u8] {
    let at = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    &raw[at + 4..]
}

#[test]
fn scanned_pdf_pages_become_images_for_a_vision_model() {
    let Some(gemma) = model_path("gemma3") else {
        return;
    };
    let root = std::env::temp_dir().join(format!("weft-scanned-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mmproj = data("vision/gemma3/mmproj-gemma3-tiny-f16.gguf");
    let server = Server::start_env(
        &[
            "--model".into(),
            format!("gemma={}", gemma.display()),
            "--mmproj".into(),
            mmproj.display().to_string(),
            "--ctx".into(),
            "1024".into(),
            "--parallel".into(),
            "1".into(),
            "--pdf-max-pages".into(),
            "2".into(),
            "--uploads-dir".into(),
            root.join("up").display().to_string(),
        ],
        &[("WEFT_HOME", &home)],
    );
    let sid = new_session(&server);
    let r = upload(&server, &sid, "scan3.pdf", &scan3());
    assert_eq!(r.status, 200, "{}", r.body);
    let p = r.json();
    assert_eq!(p["kind"], "pdf", "{p}");
    assert_eq!(p["renderedAsImages"], true, "{p}");
    assert_eq!(p["pageCount"], 3, "{p}");
    assert_eq!(p["extractedPageCount"], 0, "{p}");
    assert!(p.get("needsVision").is_none(), "{p}");
    assert_eq!(p["truncated"], true, "only 2 of 3 pages: {p}");
    assert!(
        p["warning"].as_str().unwrap().contains("--pdf-max-pages"),
        "{p}"
    );
    let frames: Vec<String> = p["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    let urls = p["frameUrls"].as_array().unwrap();
    assert_eq!((frames.len(), urls.len()), (2, 2), "{p}");
    for (f, u) in frames.iter().zip(urls) {
        assert!(f.ends_with(".png") && f.len() == 36, "{f}");
        let u = u.as_str().unwrap();
        assert!(u.starts_with(&format!("/uploads/{f}?sessionId=")), "{u}");
        let got = raw(&server, "GET", u, None, "text/plain");
        let head = String::from_utf8_lossy(&got[..got.len().min(400)]).to_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(head.contains("content-type: image/png"), "{head}");
        // 612 x 792 pt at 150 dpi, capped to 1536 pixels on the long side.
        assert_eq!(png_size(body_of(&got)), (1187, 1536));
        // Another session does not see the pages.
        let other = new_session(&server);
        let stranger = format!("/uploads/{f}?sessionId={other}");
        assert_eq!(server.request("GET", &stranger, None).status, 404);
    }

    // The pages are images of the session: the chat reads them as `imagePaths`.
    let chat = json!({
        "sessionId": sid,
        "model": "gemma",
        "messages": [{"role": "user", "content": "What is on these pages?", "imagePaths": frames}],
        "maxTokens": 4,
        "temperature": 0,
    });
    let r = server.request("POST", "/api/ui/chat", Some(&chat.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let done: Value = r
        .sse_data()
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v["done"] == true)
        .unwrap_or_else(|| panic!("no final frame: {}", r.body));
    assert!(done["error"].is_null(), "{done}");
    // Two 896-pixel images are 256 soft tokens each in Gemma 3's prompt.
    assert!(
        done["promptTokens"].as_u64().unwrap() > 512,
        "the pages were not in the prompt: {done}"
    );

    // A picture is stored without the "no model has vision" warning here.
    let png = std::fs::read(data("vision/images/square_224x224.png")).unwrap();
    let r = upload(&server, &sid, "square.png", &png);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["kind"], "image", "{}", r.body);
    assert!(r.json().get("warning").is_none(), "{}", r.body);

    // A PDF hiding a 30000 x 30000 image is refused before anything is drawn.
    let r = upload(&server, &sid, "bomb.pdf", &pdf_with_image(30000));
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(r.body.contains("pixels"), "{}", r.body);
    assert_eq!(server.request("GET", "/health", None).status, 200);
    drop(server);

    // Without a projector the same file is stored with `needsVision` and the warning.
    let server = Server::start_env(
        &[
            "--model".into(),
            format!("gemma={}", gemma.display()),
            "--ctx".into(),
            "512".into(),
            "--uploads-dir".into(),
            root.join("up2").display().to_string(),
        ],
        &[("WEFT_HOME", &home)],
    );
    let sid = new_session(&server);
    let r = upload(&server, &sid, "scan3.pdf", &scan3());
    assert_eq!(r.status, 200, "{}", r.body);
    let p = r.json();
    assert_eq!(p["needsVision"], true, "{p}");
    assert_eq!(p["renderedAsImages"], false, "{p}");
    assert!(p.get("frames").is_none(), "{p}");
    let warning = p["warning"].as_str().unwrap();
    assert!(
        warning.contains("no text layer") && warning.contains("--mmproj"),
        "{p}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
}
