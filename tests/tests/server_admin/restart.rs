//! `POST /api/v1/restart`: a stream in flight when the restart is asked for completes in
//! full, then the same process (re-executed) answers again on the same port, with its state.

use std::io::Read;
use std::time::{Duration, Instant};

use serde_json::json;
use weft_tests::{send, Response};

use crate::harness::{api_key, call, Db};
use crate::on_both;

on_both!(restart, restart_sqlite, restart_postgres);

const ADMIN: &str = "weft_env-admin-key-for-the-restart-tests-0001";

fn restart(db: &Db) {
    let server = db.serve_env(&[], &[("WEFT_ADMIN_KEY", ADMIN)]);
    let c = server.client();
    let r = call(
        &c,
        ADMIN,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"top_k": 9}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // Only an admin may restart.
    let (_, user) = api_key(&c, ADMIN, json!({"name": "not-admin", "role": "user"}));
    assert_eq!(call(&c, &user, "POST", "/api/v1/restart", None).status, 403);
    assert_eq!(call(&c, "", "POST", "/api/v1/restart", None).status, 401);

    let mut s = c.connect().unwrap();
    let body = json!({"model": "smol", "stream": true, "max_tokens": 64, "temperature": 0, "ignore_eos": true,
        "messages": [{"role": "user", "content": "Write a long story about a cat who learns to sail. Use many details."}]});
    let auth = format!("Bearer {ADMIN}");
    send(
        &mut s,
        "POST",
        "/v1/chat/completions",
        Some(body.to_string().as_bytes()),
        &[("Authorization", &auth)],
    )
    .unwrap();
    // Read until the first generated text arrives: the stream is in flight.
    let mut first = Vec::new();
    let mut buf = [0u8; 4096];
    let generating = |b: &[u8]| {
        let t = String::from_utf8_lossy(b);
        t.matches("\"content\":\"").count() > t.matches("\"content\":\"\"").count()
    };
    while !generating(&first) {
        let n = s.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "the stream ended early: {}",
            String::from_utf8_lossy(&first)
        );
        first.extend_from_slice(&buf[..n]);
    }
    let reader = std::thread::spawn(move || {
        let mut all = first;
        s.read_to_end(&mut all).unwrap();
        all
    });

    let r = call(&c, ADMIN, "POST", "/api/v1/restart", None);
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.json()["status"], "restarting");

    let stream = Response::parse(&reader.join().unwrap());
    assert_eq!(stream.status, 200, "{}", stream.body);
    let data = stream.sse_data();
    assert_eq!(
        data.last().map(String::as_str),
        Some("[DONE]"),
        "the stream was cut: {}",
        stream.body
    );
    let finish: Vec<String> = data
        .iter()
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|v| v["choices"][0]["finish_reason"].as_str().map(String::from))
        .collect();
    // All 64 tokens came (the story is longer than that), then [DONE].
    assert_eq!(finish, ["length"], "{}", stream.body);

    // The same port answers again, from a fresh start of the same process.
    let t0 = Instant::now();
    loop {
        if let Ok(r) = c.try_request("GET", "/ready", None, &[]) {
            if r.status == 200 {
                break;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "not back after the restart"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let starts = server
        .log()
        .iter()
        .filter(|l| l.contains(&format!("listening on http://127.0.0.1:{}", server.port)))
        .count();
    assert_eq!(starts, 2, "{:?}", server.log());
    let about = call(&c, ADMIN, "GET", "/api/v1/about", None).json();
    assert!(
        about["uptime_secs"].as_u64().unwrap() < t0.elapsed().as_secs() + 5,
        "{about}"
    );
    let s = call(&c, ADMIN, "GET", "/api/v1/settings", None).json();
    assert_eq!(s["top_k"], 9, "{s}");
    let audit = call(&c, ADMIN, "GET", "/api/v1/audit", None).json();
    assert!(
        audit["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["route"] == "/api/v1/restart" && r["status"] == 202),
        "{audit}"
    );
}
