//! `GET /api/v1/logs/stream`: an admin subscriber gets one `log` event per finished request,
//! naming the key by its id (never the key), with the model and token counts; other roles
//! get a 403.

use std::io::{BufRead, BufReader, Write};

use serde_json::{json, Value};

use crate::harness::{api_key, call, Db};
use crate::on_both;

on_both!(logs_stream, logs_stream_sqlite, logs_stream_postgres);
on_both!(
    logging_level_live,
    logging_level_live_sqlite,
    logging_level_live_postgres
);

/// The `logging_level` setting: validated, and applied to the running server's log at once.
fn logging_level_live(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let debug_lines = || server.log().iter().filter(|l| l.contains("DEBUG")).count();
    assert_eq!(call(&c, &admin, "GET", "/v1/models", None).status, 200);
    if std::env::var_os("RUST_LOG").is_none() {
        assert_eq!(debug_lines(), 0, "{:?}", server.log());
    }
    for bad in [
        r#"{"logging_level": "info,[[["}"#,
        r#"{"logging_level": 3}"#,
        r#"{"logging_level": ""}"#,
    ] {
        let r = call(&c, &admin, "PATCH", "/api/v1/settings", Some(bad));
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert!(
            r.json()["error"]
                .as_str()
                .unwrap()
                .contains("logging_level"),
            "{}",
            r.body
        );
    }
    let r = call(
        &c,
        &admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"logging_level": "debug"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["logging_level"], "debug");
    let body =
        r#"{"model": "smol", "max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]}"#;
    assert_eq!(
        call(&c, &admin, "POST", "/v1/chat/completions", Some(body)).status,
        200
    );
    // The log is read from the server's stderr by another thread: wait for it (bounded).
    let t0 = std::time::Instant::now();
    while debug_lines() == 0 && t0.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(debug_lines() > 0, "{:?}", server.log());
}

fn logs_stream(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let (user_id, user) = api_key(&c, &admin, json!({"name": "u", "role": "user"}));
    let r = call(&c, &user, "GET", "/api/v1/logs/stream", None);
    assert_eq!(r.status, 403, "{}", r.body);

    let mut s = c.connect().unwrap();
    write!(
        s,
        "GET /api/v1/logs/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {admin}\r\n\r\n"
    )
    .unwrap();
    let mut lines = BufReader::new(s);
    let mut status = String::new();
    lines.read_line(&mut status).unwrap();
    assert!(status.contains(" 200 "), "{status}");

    let body = json!({"model": "smol", "max_tokens": 5,
        "messages": [{"role": "user", "content": "Hi"}]});
    let r = call(
        &c,
        &user,
        "POST",
        "/v1/chat/completions",
        Some(&body.to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let usage = r.json()["usage"].clone();
    let request_id = r.header("x-request-id").unwrap().to_string();

    // Read the stream until the chat's event (the forbidden call above may come first).
    let mut seen = String::new();
    let event = loop {
        let mut line = String::new();
        assert!(
            lines.read_line(&mut line).unwrap() > 0,
            "stream ended: {seen}"
        );
        seen.push_str(&line);
        let Some(data) = line.trim().strip_prefix("data:") else {
            continue;
        };
        let Ok(ev) = serde_json::from_str::<Value>(data.trim()) else {
            continue;
        };
        if ev["route"] == "/v1/chat/completions" {
            break ev;
        }
    };
    assert_eq!(event["request_id"], request_id.as_str(), "{event}");
    assert_eq!(event["key_id"], user_id.as_str(), "{event}");
    assert_eq!(event["model"], "smol", "{event}");
    assert_eq!(event["status"], 200, "{event}");
    assert_eq!(event["prompt_tokens"], usage["prompt_tokens"], "{event}");
    assert_eq!(
        event["completion_tokens"], usage["completion_tokens"],
        "{event}"
    );
    assert!(event["latency_ms"].is_u64(), "{event}");
    assert!(!seen.contains(&user) && !seen.contains(&admin), "{seen}");
    assert!(seen.contains("event: log"), "{seen}");
}
