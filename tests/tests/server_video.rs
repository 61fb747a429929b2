//! Video generation over real HTTP on `weft serve --model <tiny Wan folder>`
//! (tests/data/video; and on the same model converted to GGUF files): `POST /api/video-generate`, its SSE stream, the OpenAI-shaped
//! `POST /v1/videos/generations` (url and b64_json), the MP4 among the caller's uploads,
//! `/api/models`' `video` block, generations as jobs (listed, queued one at a time,
//! cancelled), the 400 table, image-to-video from an uploaded first frame, and a text model
//! asked for video.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use serde_json::{json, Value};
use weft_core::test_support::model_path;
use weft_tests::{send, Response, Server};

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/video")
        .join(rel)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-server-video-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A server of a tiny Wan model with small defaults (64x48, 5 frames, 2 steps), with a home
/// (database, uploads) of its own so its job list is its own.
fn serve(model: &str, name: &str) -> Server {
    serve_with(model, name, &[])
}

/// [`serve`] with `extra` flags (`model` may be an absolute path).
fn serve_with(model: &str, name: &str, extra: &[&str]) -> Server {
    let models = scratch(&format!("{name}-models"));
    let home = scratch(&format!("{name}-home"));
    let args: Vec<String> = [
        "--model",
        data(model).to_str().unwrap(),
        "--video-width",
        "64",
        "--video-height",
        "48",
        "--video-frames",
        "5",
        "--video-steps",
        "2",
        "--models-dir",
        models.to_str().unwrap(),
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect();
    Server::start_env(&args, &[("WEFT_HOME", home.as_path())])
}

fn post(s: &Server, path: &str, body: &Value) -> Response {
    s.request("POST", path, Some(&body.to_string()))
}

/// The raw bytes of `GET path` (the harness's Response keeps text).
fn get_bytes(s: &Server, path: &str) -> (u16, String, Vec<u8>) {
    let mut c = s.connect().unwrap();
    send(&mut c, "GET", path, None, &[]).unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut body = raw[split + 4..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        body = dechunk(&body);
    }
    (status, head, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(nl) = b.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&b[..nl]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.extend_from_slice(&b[nl + 2..nl + 2 + size]);
        b = &b[nl + 4 + size..];
    }
    out
}

fn is_mp4(b: &[u8]) -> bool {
    b.len() > 12 && &b[4..8] == b"ftyp"
}

const PROMPT: &str = "A red fox runs through fresh snow at dawn.";

fn jobs(s: &Server) -> Vec<Value> {
    let r = s.request("GET", "/api/v1/jobs", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["jobs"].as_array().unwrap().clone()
}

#[test]
fn t2v_routes_answer_in_the_documented_shapes() {
    let s = serve("tiny-wan/t2v", "t2v");

    let models = s.request("GET", "/api/models", None).json();
    assert_eq!(
        models["video"],
        json!({"family": "wan", "supportsAudio": false, "supportsImageConditioning": false,
               "supportsEndImageConditioning": false, "supportsReferenceConditioning": false,
               "maxReferenceImages": 0})
    );

    // Plain: the startup defaults (64x48, 5 frames, 2 steps), 16 fps.
    let started = std::time::Instant::now();
    let r = post(
        &s,
        "/api/video-generate",
        &json!({"prompt": PROMPT, "seed": 5}),
    );
    eprintln!(
        "tiny t2v over HTTP (64x48, 5 frames, 2 steps): {:.2} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    for (k, want) in [
        ("ok", json!(true)),
        ("audioUrl", Value::Null),
        ("width", json!(64)),
        ("height", json!(48)),
        ("frames", json!(5)),
        ("fps", json!(16)),
        ("seed", json!(5)),
        ("codec", json!("h264")),
    ] {
        assert_eq!(v[k], want, "{k}: {v}");
    }
    assert!(v["elapsedSeconds"].as_f64().unwrap() > 0.0);
    let url = v["url"].as_str().unwrap();
    assert!(
        url.starts_with("/uploads/") && url.ends_with(".mp4"),
        "{url}"
    );
    let (status, head, mp4) = get_bytes(&s, url);
    assert_eq!(status, 200);
    assert!(head.contains("content-type: video/mp4"), "{head}");
    assert!(is_mp4(&mp4));

    // OpenAI-shaped, inline: the same request (size instead of width/height), the same bytes.
    let r = post(
        &s,
        "/v1/videos/generations",
        &json!({"prompt": PROMPT, "size": "64x48", "seed": 5, "response_format": "b64_json"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let o = r.json();
    let b64 = o["data"][0]["b64_json"].as_str().unwrap();
    let inline = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    assert_eq!(inline, mp4, "same seed and settings, same MP4");
    assert_eq!(
        (o["width"].clone(), o["frames"].clone()),
        (json!(64), json!(5))
    );
    assert!(o["created"].as_u64().is_some() && o["elapsed_seconds"].as_f64().is_some());
    // And as a url, another size and seed.
    let r = post(
        &s,
        "/v1/videos/generations",
        &json!({"prompt": PROMPT, "size": "80x64", "negative_prompt": "blurry", "seed": 6}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let o = r.json();
    assert_eq!(
        (o["width"].clone(), o["height"].clone()),
        (json!(80), json!(64))
    );
    let (status, _, other) = get_bytes(&s, o["data"][0]["url"].as_str().unwrap());
    assert_eq!(status, 200);
    assert!(is_mp4(&other) && other != mp4);

    // Streamed: videoGen ticks in phase order, steps in order, then done.
    let r = post(
        &s,
        "/api/video-generate/stream",
        &json!({"prompt": PROMPT, "seed": 7, "steps": 3, "sampler": "euler"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let frames: Vec<Value> = r
        .sse_data()
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let last = frames.last().unwrap();
    assert_eq!(last["done"], json!(true), "{last}");
    assert!(last["url"].as_str().unwrap().starts_with("/uploads/"));
    assert_eq!(last["seed"], json!(7));
    let order = ["text-encode", "denoise", "vae-decode", "done"];
    let mut at = (0, 0);
    for f in &frames[..frames.len() - 1] {
        assert_eq!(f["videoGen"], json!(true), "{f}");
        let phase = order
            .iter()
            .position(|p| f["phase"] == *p)
            .unwrap_or_else(|| panic!("phase of {f}"));
        let step = f["step"].as_u64().unwrap();
        assert!((phase, step) >= at, "out of order: {f} after {at:?}");
        at = (phase, step);
        if f["phase"] == "denoise" {
            assert_eq!(f["total"], json!(3));
        }
    }
    assert_eq!(at.0, 3, "the ticks end with phase done");

    // Every generation was a job of the caller, listed with its progress.
    let video_jobs: Vec<Value> = jobs(&s)
        .into_iter()
        .filter(|j| j["kind"] == "video")
        .collect();
    assert_eq!(video_jobs.len(), 4, "{video_jobs:?}");
    assert!(video_jobs.iter().all(|j| j["status"] == "succeeded"));
    assert!(video_jobs.iter().any(|j| j["request"]["seed"] == json!(5)
        && j["request"]["width"] == json!(64)
        && j["progress"]["unit"] == "steps"));
}

#[test]
fn bad_requests_are_400_with_a_reason() {
    let s = serve("tiny-wan/t2v", "bad");
    let png = std::fs::read(data("ref/first_frame.png")).unwrap();
    let png64 = base64::engine::general_purpose::STANDARD.encode(&png);
    for (path, body, says) in [
        ("/api/video-generate", json!({"prompt": ""}), "prompt"),
        (
            "/api/video-generate",
            json!({"prompt": "x", "width": 0}),
            "width",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "height": 100000}),
            "too large",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "frames": 0}),
            "frames",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "frames": 100000}),
            "too many",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "steps": 0}),
            "steps",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "sampler": "dpm"}),
            "unknown sampler",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "fps": 0}),
            "fps",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "videoMode": "fl2v"}),
            "fl2v",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "videoMode": "i2v"}),
            "text-to-video",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "image": format!("data:image/png;base64,{png64}")}),
            "text-to-video",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "image": "@@not base64@@"}),
            "base64",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "image": base64::engine::general_purpose::STANDARD.encode(b"not an image")}),
            "decoded",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "imagePath": "/etc/passwd"}),
            "outside",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "imagePath": "../../x.png"}),
            "outside",
        ),
        (
            "/api/video-generate",
            json!({"prompt": "x", "imagePath": "0123456789abcdef0123456789abcdef.png"}),
            "outside",
        ),
        (
            "/api/video-generate/stream",
            json!({"prompt": "x", "frames": 0}),
            "frames",
        ),
        (
            "/v1/videos/generations",
            json!({"prompt": "x", "size": "64by48"}),
            "size",
        ),
        (
            "/v1/videos/generations",
            json!({"prompt": "x", "size": "0x48"}),
            "width",
        ),
        (
            "/v1/videos/generations",
            json!({"prompt": "x", "response_format": "gif"}),
            "response_format",
        ),
    ] {
        let r = post(&s, path, &body);
        assert_eq!(r.status, 400, "{path} {body}: {}", r.body);
        assert!(
            r.body.to_lowercase().contains(&says.to_lowercase()),
            "{path} {body}: {}",
            r.body
        );
    }
    // Nothing was queued by any of them.
    assert!(jobs(&s).iter().all(|j| j["kind"] != "video"));
}

/// Reads SSE `data:` frames from an open stream until `stop` says so; returns them.
fn read_frames(reader: &mut impl BufRead, mut stop: impl FnMut(&Value) -> bool) -> Vec<Value> {
    let mut out = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            return out;
        }
        let Some(d) = line.trim_end().strip_prefix("data:") else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(d.trim()) else {
            continue;
        };
        let end = stop(&v);
        out.push(v);
        if end {
            return out;
        }
    }
}

#[test]
fn generations_queue_one_at_a_time_and_cancel() {
    let s = serve("tiny-wan/t2v", "cancel");
    // A long generation (many steps at a larger size), streamed.
    let mut c = s.connect().unwrap();
    let body = json!({"prompt": PROMPT, "width": 384, "height": 384, "frames": 17,
                      "steps": 200, "seed": 1})
    .to_string();
    send(
        &mut c,
        "POST",
        "/api/video-generate/stream",
        Some(body.as_bytes()),
        &[],
    )
    .unwrap();
    let mut reader = BufReader::new(c);
    let first = read_frames(&mut reader, |f| f["phase"] == "denoise");
    let id = first.last().unwrap()["jobId"].as_str().unwrap().to_string();

    // A second generation waits behind it.
    let port = s.port;
    let second = std::thread::spawn(move || {
        let c = Server::attach(port);
        c.request(
            "POST",
            "/api/video-generate",
            Some(&json!({"prompt": PROMPT, "seed": 2}).to_string()),
        )
    });
    let mut queued = false;
    for _ in 0..600 {
        let all = jobs(&s);
        let running = all.iter().find(|j| j["id"] == id.as_str()).unwrap();
        assert_eq!(running["status"], "running", "{running}");
        if all
            .iter()
            .any(|j| j["kind"] == "video" && j["status"] == "queued")
        {
            queued = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(queued, "the second generation is queued behind the first");

    let r = s.request("POST", &format!("/api/v1/jobs/{id}/cancel"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let rest = read_frames(&mut reader, |f| f["done"] == json!(true));
    let end = rest.last().unwrap();
    assert_eq!(end["done"], json!(true));
    assert_eq!(end["error"], json!("cancelled"), "{end}");
    assert!(rest.iter().all(|f| f["phase"] != "vae-decode"));

    // The queued one then runs.
    let r = second.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let cancelled = jobs(&s)
        .into_iter()
        .find(|j| j["id"] == id.as_str())
        .unwrap();
    assert_eq!(cancelled["status"], "cancelled");
}

const BOUNDARY: &str = "weft-video-boundary";

/// Uploads `bytes` as `name` through `POST /api/upload`; returns its stored name.
fn upload(s: &Server, name: &str, bytes: &[u8]) -> String {
    let mut body = Vec::new();
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    let mut c = s.connect().unwrap();
    let ctype = format!("multipart/form-data; boundary={BOUNDARY}");
    send(
        &mut c,
        "POST",
        "/api/upload",
        Some(&body),
        &[("Content-Type", &ctype)],
    )
    .unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    let r = Response::parse(&raw);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["files"][0]["file"].as_str().unwrap().to_string()
}

#[test]
fn i2v_from_an_uploaded_first_frame() {
    // The i2v folder has no text encoder, tokenizer or VAE: the server finds t2v's beside it.
    let s = serve("tiny-wan/i2v", "i2v");
    let models = s.request("GET", "/api/models", None).json();
    assert_eq!(models["video"]["supportsImageConditioning"], json!(true));
    let r = post(&s, "/api/video-generate", &json!({"prompt": PROMPT}));
    assert_eq!(r.status, 400);
    assert!(r.body.contains("needs an image"), "{}", r.body);

    let png = std::fs::read(data("ref/first_frame.png")).unwrap();
    let name = upload(&s, "first.png", &png);
    let r = post(
        &s,
        "/api/video-generate",
        &json!({"prompt": PROMPT, "imagePath": name, "videoMode": "i2v", "cfg2": 3.0, "seed": 3}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    // No size given: the image's aspect ratio (64x48 is the defaults' too).
    assert_eq!(
        (v["width"].clone(), v["height"].clone()),
        (json!(64), json!(48))
    );
    let (status, _, mp4) = get_bytes(&s, v["url"].as_str().unwrap());
    assert_eq!(status, 200);
    assert!(is_mp4(&mp4));
    // Inline, the same frame gives the same video.
    let png64 = base64::engine::general_purpose::STANDARD.encode(&png);
    let r = post(
        &s,
        "/api/video-generate",
        &json!({"prompt": PROMPT, "image": png64, "cfg2": 3.0, "seed": 3}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let (_, _, again) = get_bytes(&s, r.json()["url"].as_str().unwrap());
    assert_eq!(again, mp4);
}

#[test]
fn a_text_model_makes_no_video() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let s = Server::start(&model, &[]);
    for path in [
        "/api/video-generate",
        "/api/video-generate/stream",
        "/v1/videos/generations",
    ] {
        let r = post(&s, path, &json!({"prompt": PROMPT}));
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert!(
            r.body
                .contains("The loaded model is not a video-generation model."),
            "{path}: {}",
            r.body
        );
    }
    let models = s.request("GET", "/api/models", None).json();
    assert_eq!(models["video"], Value::Null);
}

/// A request with `Authorization: Bearer KEY`.
fn call(s: &Server, key: &str, method: &str, path: &str, body: Option<&Value>) -> Response {
    let auth = format!("Bearer {key}");
    let body = body.map(Value::to_string);
    s.try_request(method, path, body.as_deref(), &[("Authorization", &auth)])
        .unwrap()
}

#[test]
fn the_video_belongs_to_the_key_that_asked() {
    let home = scratch("owners-home");
    let models = scratch("owners-models");
    let admin = "weft_video_test_admin_key_0123456789abcdef";
    let server = Server::start_env(
        &[
            "--model".into(),
            data("tiny-wan/t2v").display().to_string(),
            "--video-width".into(),
            "64".into(),
            "--video-height".into(),
            "48".into(),
            "--video-frames".into(),
            "5".into(),
            "--video-steps".into(),
            "2".into(),
            "--models-dir".into(),
            models.display().to_string(),
        ],
        &[
            ("WEFT_HOME", home.as_path()),
            ("WEFT_ADMIN_KEY", std::path::Path::new(admin)),
        ],
    );
    let made = AtomicUsize::new(0);
    let key = |role: &str| {
        let r = call(
            &server,
            admin,
            "POST",
            "/api/v1/keys",
            Some(
                &json!({"name": format!("video-{role}-{}", made.fetch_add(1, Ordering::Relaxed)),
                         "role": role}),
            ),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        r.json()["key"].as_str().unwrap().to_string()
    };
    let (a, b, reader) = (key("user"), key("user"), key("readonly"));
    let body = json!({"prompt": PROMPT, "seed": 9});
    // Generating needs a user key.
    let r = server.request("POST", "/api/video-generate", Some(&body.to_string()));
    assert_eq!(r.status, 401, "{}", r.body);
    let r = call(&server, &reader, "POST", "/api/video-generate", Some(&body));
    assert_eq!(r.status, 403, "{}", r.body);
    let r = call(&server, &a, "POST", "/api/video-generate", Some(&body));
    assert_eq!(r.status, 200, "{}", r.body);
    let url = r.json()["url"].as_str().unwrap().to_string();
    // A fetches it; B, and even the admin, get the 404 of a missing file.
    assert_eq!(call(&server, &a, "GET", &url, None).status, 200);
    for other in [&b, &admin.to_string()] {
        let r = call(&server, other, "GET", &url, None);
        assert_eq!(r.status, 404, "{}", r.body);
    }
    // B cannot name A's upload as a first frame either (refused like a file that is not
    // there), nor see A's job.
    let name = url.trim_start_matches("/uploads/");
    let r = call(
        &server,
        &b,
        "POST",
        "/api/video-generate",
        Some(&json!({"prompt": PROMPT, "imagePath": name})),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("outside"), "{}", r.body);
    let mine = call(&server, admin, "GET", "/api/v1/jobs", None).json();
    assert!(mine["jobs"].as_array().unwrap().is_empty(), "{mine}");
    let all = call(&server, admin, "GET", "/api/v1/jobs?owner=all", None).json();
    assert_eq!(all["jobs"].as_array().unwrap().len(), 1, "{all}");
    // Bounded: a body over the inline image bound is refused before it is decoded (the
    // server may answer before reading it all, so a failed write is expected).
    let huge = json!({"prompt": PROMPT, "image": "A".repeat(17 << 20)}).to_string();
    let mut c = server.connect().unwrap();
    let auth = format!("Bearer {a}");
    let _ = send(
        &mut c,
        "POST",
        "/api/video-generate",
        Some(huge.as_bytes()),
        &[("Authorization", &auth)],
    );
    let mut raw = Vec::new();
    let _ = c.read_to_end(&mut raw);
    let r = Response::parse(&raw);
    assert!(r.status == 400 || r.status == 413, "{}", r.status);
}

/// The tiny i2v model converted (weft convert's API) to its two expert GGUFs, served by naming
/// one of them, with the UMT5 GGUF and the VAE (converted from t2v, the folder i2v shares them
/// with) in another folder, named by `--video-text-encoder` / `--video-vae`: the same video
/// as the folder model's, byte for byte.
#[test]
fn i2v_from_gguf_files_makes_the_folder_video() {
    use weft_core::diffusion::wan_convert::convert_pipeline;
    let (models, companions) = (scratch("gguf-i2v"), scratch("gguf-companions"));
    for (src, out) in [("tiny-wan/i2v", &models), ("tiny-wan/t2v", &companions)] {
        convert_pipeline(&data(src), out, None, None, &mut |_, _, _| true).unwrap();
    }
    let png = std::fs::read(data("ref/first_frame.png")).unwrap();
    let png64 = base64::engine::general_purpose::STANDARD.encode(&png);
    let body = json!({"prompt": PROMPT, "image": png64, "cfg2": 3.0, "seed": 3});
    let video = |s: &Server| {
        let r = post(s, "/api/video-generate", &body);
        assert_eq!(r.status, 200, "{}", r.body);
        get_bytes(s, r.json()["url"].as_str().unwrap()).2
    };
    let want = video(&serve("tiny-wan/i2v", "i2v-folder"));

    let (te, vae) = (
        companions.join("t2v-umt5.gguf"),
        companions.join("t2v-vae.safetensors"),
    );
    let s = serve_with(
        models.join("i2v-high-noise.gguf").to_str().unwrap(),
        "i2v-gguf",
        &[
            "--video-text-encoder",
            te.to_str().unwrap(),
            "--video-vae",
            vae.to_str().unwrap(),
        ],
    );
    let m = s.request("GET", "/api/models", None).json();
    assert_eq!(m["video"]["supportsImageConditioning"], json!(true), "{m}");
    let got = video(&s);
    assert!(is_mp4(&got));
    assert_eq!(got, want, "the GGUF files make the folder's video");
}
