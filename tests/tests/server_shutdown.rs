//! Graceful shutdown: on SIGTERM the server stops taking requests, lets a running stream
//! finish (it ends with `[DONE]`), and exits successfully.

#![cfg(unix)]

use std::io::Read;

use serde_json::json;
use weft_core::test_support::model_path;
use weft_tests::{send, Response, Server};

#[test]
fn sigterm_finishes_running_streams_then_exits() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let mut server = Server::start(
        &model,
        &["--ctx", "256", "--parallel", "1", "--alias", "smol"],
    );
    let body = json!({"model": "smol", "prompt": "Once upon a time", "max_tokens": 12,
                      "temperature": 0, "stream": true, "ignore_eos": true});
    let mut conn = server.connect().unwrap();
    send(
        &mut conn,
        "POST",
        "/v1/completions",
        Some(body.to_string().as_bytes()),
        &[],
    )
    .unwrap();
    // Wait for the first frame so the request is running before the signal.
    let mut raw = Vec::new();
    let mut chunk = [0u8; 512];
    while !String::from_utf8_lossy(&raw).contains("data:") {
        let n = conn.read(&mut chunk).unwrap();
        assert!(n > 0);
        raw.extend_from_slice(&chunk[..n]);
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    conn.read_to_end(&mut raw).unwrap();
    let r = Response::parse(&raw);
    let data = r.sse_data();
    assert_eq!(
        data.last().map(String::as_str),
        Some("[DONE]"),
        "{}",
        r.body
    );
    let finish = data
        .iter()
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .find_map(|v| {
            v["choices"][0]["finish_reason"]
                .as_str()
                .map(str::to_string)
        });
    assert_eq!(finish.as_deref(), Some("length"));
    assert!(server.wait().success());
    assert!(server.log().iter().any(|l| l.contains("shutting down")));
}
