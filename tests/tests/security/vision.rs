//! Images are bounded before they are decoded (docs/vision.md): a decompression bomb (a PNG
//! whose header claims 30000x30000 over a deflate stream of zeros) is refused from its header
//! with the server's peak resident size unchanged; too many images, too many image bytes and
//! image tokens past the context are refused before any work; remote URLs are never fetched;
//! the server keeps serving images afterwards.

use std::io::Write;

use base64::Engine as _;
use serde_json::json;
use weft_core::test_support::model_path;
use weft_tests::Server;

/// Most the server's peak resident size may grow during the attacks.
const RSS_BOUND: u64 = 64 << 20;

fn peak(s: &Server) -> u64 {
    let st = std::fs::read_to_string(format!("/proc/{}/status", s.pid())).unwrap();
    let kb: u64 = st
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb << 10
}

fn chunk(out: &mut Vec<u8>, kind: &[u8], body: &[u8]) {
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    let mut crc = flate2::Crc::new();
    crc.update(kind);
    crc.update(body);
    out.extend_from_slice(kind);
    out.extend_from_slice(body);
    out.extend_from_slice(&crc.sum().to_be_bytes());
}

/// An RGB PNG claiming `side` x `side`, its data `rows` rows of zeros (deflated: a few KB).
fn bomb(side: u32, rows: usize) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let row = vec![0u8; side as usize * 3 + 1];
    for _ in 0..rows {
        z.write_all(&row).unwrap();
    }
    chunk(&mut out, b"IDAT", &z.finish().unwrap());
    chunk(&mut out, b"IEND", &[]);
    out
}

fn uri(bytes: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    format!("data:image/png;base64,{b64}")
}

fn chat(s: &Server, urls: &[String]) -> (u16, serde_json::Value) {
    let mut content: Vec<serde_json::Value> = urls
        .iter()
        .map(|u| json!({"type": "image_url", "image_url": {"url": u}}))
        .collect();
    content.push(json!({"type": "text", "text": "What is this?"}));
    let body = json!({"model": "gemma", "max_tokens": 1,
                      "messages": [{"role": "user", "content": content}]});
    let r = s.request("POST", "/v1/chat/completions", Some(&body.to_string()));
    (r.status, r.json())
}

fn refused(s: &Server, what: &str, urls: &[String], needle: &str) {
    let (status, body) = chat(s, urls);
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        status == 400 && msg.contains(needle),
        "{what}: {status} {body}"
    );
}

#[test]
fn images_are_bounded_before_decoding() {
    let Some(gemma) = model_path("gemma3") else {
        return;
    };
    let mmproj = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data/vision/gemma3/mmproj-gemma3-tiny-f16.gguf");
    let s = Server::start_args(
        &[
            "--model",
            &format!("gemma={}", gemma.display()),
            "--mmproj",
            &mmproj.display().to_string(),
            "--ctx",
            "512",
            "--parallel",
            "1",
            "--max-images",
            "2",
            "--max-image-bytes",
            "2MiB",
        ]
        .map(String::from),
    );
    let small = uri(&bomb(16, 16));
    // A first image request, so the encoder and its buffers are part of the peak.
    assert_eq!(chat(&s, std::slice::from_ref(&small)).0, 200);
    let before = peak(&s);
    // 30000 x 30000 x 3 = 2.7 GB of pixels behind a few KB of PNG.
    let b = bomb(30000, 2000);
    assert!(b.len() < 1 << 20, "the bomb is {} bytes", b.len());
    refused(&s, "bomb", &[uri(&b)], "30000x30000");
    // Under the pixel limit but past the context: refused from the header before decoding.
    refused(
        &s,
        "tokens past the context",
        &[small.clone(), small.clone()],
        "context holds",
    );
    refused(
        &s,
        "too many images",
        &[small.clone(), small.clone(), small.clone()],
        "too many images",
    );
    refused(
        &s,
        "too many bytes",
        &[uri(&vec![0u8; 3 << 20])],
        "larger than",
    );
    refused(
        &s,
        "remote url",
        &["http://127.0.0.1:9/x.png".into()],
        "not fetched",
    );
    let grew = peak(&s).saturating_sub(before);
    assert!(
        grew < RSS_BOUND,
        "the server's peak RSS grew by {} MiB",
        grew >> 20
    );
    assert_eq!(s.request("GET", "/health", None).status, 200);
    assert_eq!(chat(&s, &[small]).0, 200);
}
