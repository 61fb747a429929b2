//! Images are bounded before they are decoded (docs/vision.md): a decompression bomb (a PNG
//! whose header claims 30000x30000 over a deflate stream of zeros) is refused from its header
//! with the server's peak resident size unchanged; too many images, too many image bytes and
//! image tokens past the context are refused before any work; remote URLs are never fetched;
//! the server keeps serving images afterwards. Videos (`video_url` parts) likewise: frames past
//! the context refused from the headers, remote URLs, options out of range, garbage and
//! unsupported codecs refused before any frame is decoded.

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

/// A chat with one `video_url` part (`extra`: its `fps` / `max_frames`).
fn video_chat(s: &Server, url: &str, extra: serde_json::Value) -> (u16, serde_json::Value) {
    let mut video = json!({"url": url});
    for (k, v) in extra.as_object().unwrap() {
        video[k] = v.clone();
    }
    let body = json!({"model": "gemma", "max_tokens": 1, "messages": [{"role": "user",
        "content": [{"type": "video_url", "video_url": video},
                    {"type": "text", "text": "What happens?"}]}]});
    let r = s.request("POST", "/v1/chat/completions", Some(&body.to_string()));
    (r.status, r.json())
}

fn video_refused(
    s: &Server,
    what: &str,
    url: &str,
    extra: serde_json::Value,
    status: u16,
    needle: &str,
) {
    let (got, body) = video_chat(s, url, extra);
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        got == status && msg.contains(needle),
        "{what}: {got} {body}"
    );
}

fn video_uri(name: &str) -> String {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data/media")
        .join(name);
    let b64 = base64::engine::general_purpose::STANDARD.encode(std::fs::read(path).unwrap());
    format!("data:video/mp4;base64,{b64}")
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
    // Videos: 4 s at 8 fps, 64x48 (tests/data/media).
    let video = video_uri("h264_baseline.mp4");
    let none = json!({});
    video_refused(
        &s,
        "video frames past the context",
        &video,
        none.clone(),
        400,
        "context holds",
    );
    video_refused(
        &s,
        "fps 0",
        &video,
        json!({"fps": 0}),
        400,
        "fps must be in",
    );
    video_refused(
        &s,
        "max_frames 65",
        &video,
        json!({"max_frames": 65}),
        400,
        "max_frames",
    );
    video_refused(
        &s,
        "remote video",
        "https://127.0.0.1:9/x.mp4",
        none.clone(),
        400,
        "not fetched",
    );
    let garbage = format!(
        "data:video/mp4;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(b"\0\0\0\x10ftypisomgarbage!")
    );
    video_refused(&s, "garbage video", &garbage, none.clone(), 400, "video 0");
    video_refused(
        &s,
        "HEVC",
        &video_uri("hevc.mp4"),
        none.clone(),
        415,
        "HEVC",
    );
    video_refused(
        &s,
        "WebM",
        &video_uri("vp9.webm"),
        none.clone(),
        415,
        "WebM",
    );
    video_refused(
        &s,
        "video too large",
        &format!("data:video/mp4;base64,{}", "A".repeat(3 << 20)),
        none,
        400,
        "larger than",
    );
    assert_eq!(video_chat(&s, &video, json!({"max_frames": 1})).0, 200);
    let grew = peak(&s).saturating_sub(before);
    assert!(
        grew < RSS_BOUND,
        "the server's peak RSS grew by {} MiB",
        grew >> 20
    );
    assert_eq!(s.request("GET", "/health", None).status, 200);
    assert_eq!(chat(&s, &[small]).0, 200);
}
