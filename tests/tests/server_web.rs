//! `weft serve`'s browser routes: the model download with HTTP Range (200 / 206 with
//! `Content-Range` / 416), HEAD, the model list, the /play/ page and path safety.

use std::io::Read;

use weft_core::test_support::model_path;
use weft_tests::{send, Server};

/// A response with its raw body bytes (model bytes are not UTF-8).
fn raw(server: &Server, method: &str, path: &str, headers: &[(&str, &str)]) -> (String, Vec<u8>) {
    let mut s = server.connect().unwrap();
    send(&mut s, method, path, None, headers).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    (
        String::from_utf8_lossy(&all[..split]).to_ascii_lowercase(),
        all[split + 4..].to_vec(),
    )
}

#[test]
fn model_download_with_ranges_and_the_play_page() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let file = std::fs::read(&model).unwrap();
    let size = file.len();
    let server = Server::start(&model, &["--ctx", "256", "--alias", "smol"]);

    // The list names the served model and where to download it.
    let list = server.request("GET", "/models", None).json();
    assert_eq!(list["models"][0]["name"], "smol");
    assert_eq!(list["models"][0]["size"], size as u64);
    let url = list["models"][0]["url"].as_str().unwrap().to_string();
    assert_eq!(url, "/models/smol/file");

    // Whole file.
    let (head, body) = raw(&server, "GET", &url, &[]);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("accept-ranges: bytes"), "{head}");
    assert!(head.contains(&format!("content-length: {size}")), "{head}");
    assert!(body == file, "the downloaded file differs from the model");

    // A middle range, an open-ended range and a suffix range.
    for (range, start, end) in [
        ("bytes=100-1099", 100, 1099),
        (&format!("bytes={}-", size - 10), size - 10, size - 1),
        ("bytes=-4", size - 4, size - 1),
        (
            &format!("bytes={}-{}", size - 3, size + 50),
            size - 3,
            size - 1,
        ),
    ] {
        let (head, body) = raw(&server, "GET", &url, &[("Range", range)]);
        assert!(head.starts_with("http/1.1 206"), "{range}: {head}");
        assert!(
            head.contains(&format!("content-range: bytes {start}-{end}/{size}")),
            "{range}: {head}"
        );
        assert_eq!(body, &file[start..=end], "{range}");
    }

    // Past the end: 416 with the size.
    let (head, _) = raw(
        &server,
        "GET",
        &url,
        &[("Range", &format!("bytes={size}-"))],
    );
    assert!(head.starts_with("http/1.1 416"), "{head}");
    assert!(
        head.contains(&format!("content-range: bytes */{size}")),
        "{head}"
    );

    // HEAD: headers only. The file name and `default` also name the model.
    let (head, body) = raw(&server, "HEAD", "/models/default/file", &[]);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains(&format!("content-length: {size}")), "{head}");
    assert!(body.is_empty());
    let fname = model.file_name().unwrap().to_string_lossy().to_string();
    let (head, _) = raw(
        &server,
        "GET",
        &format!("/models/{fname}/file"),
        &[("Range", "bytes=0-3")],
    );
    assert!(head.starts_with("http/1.1 206"), "{head}");
    let r = server.request("GET", "/models/other/file", None);
    assert_eq!(r.status, 404);
    assert!(r.body.contains("smol"), "{}", r.body);

    // The page and its stylesheet; escaping the web directory is refused.
    let r = server.request("GET", "/play/", None);
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    assert!(r.body.contains("app.js"));
    let r = server.request("GET", "/play/style.css", None);
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/css"));
    let r = server.request("GET", "/play", None);
    assert_eq!(r.status, 308);
    let r = server.request("GET", "/play/..%2F..%2FCargo.toml", None);
    assert_ne!(r.status, 200, "{}", r.body);
    let r = server.request("GET", "/play/nope.js", None);
    assert_eq!(r.status, 404);
}
