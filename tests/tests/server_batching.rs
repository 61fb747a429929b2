//! Continuous batching: 16 concurrent streaming greedy requests with different prompts all
//! complete, each with exactly the text it gets when sent alone; a full queue answers 429 with
//! Retry-After; a client that disconnects has its sequence cancelled.

use std::io::Read;

use serde_json::{json, Value};
use weft_core::test_support::model_path;
use weft_tests::{send, Response, Server};

const SUBJECTS: [&str; 16] = [
    "cats",
    "rivers",
    "winter",
    "bread",
    "music",
    "trains",
    "the moon",
    "gardens",
    "rain",
    "books",
    "bicycles",
    "coffee",
    "mountains",
    "the ocean",
    "clocks",
    "honey",
];

fn body(subject: &str, stream: bool) -> String {
    json!({"model": "smol", "max_tokens": 6, "temperature": 0, "stream": stream,
           "messages": [{"role": "user", "content": format!("Say something about {subject}.")}]})
    .to_string()
}

/// Text of a streamed chat completion (content deltas concatenated), checking the framing.
fn streamed_text(r: &Response) -> String {
    assert_eq!(r.status, 200, "{}", r.body);
    let data = r.sse_data();
    assert_eq!(
        data.last().map(String::as_str),
        Some("[DONE]"),
        "{}",
        r.body
    );
    let mut text = String::new();
    for d in &data[..data.len() - 1] {
        let v: Value = serde_json::from_str(d).unwrap();
        if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
            text.push_str(c);
        }
    }
    text
}

#[test]
fn concurrent_streams_match_sequential_greedy_runs() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let server = Server::start(
        &model,
        &["--ctx", "256", "--parallel", "16", "--alias", "smol"],
    );
    let alone: Vec<String> = SUBJECTS
        .iter()
        .map(|s| {
            streamed_text(&server.request("POST", "/v1/chat/completions", Some(&body(s, true))))
        })
        .collect();
    let before = server.request("GET", "/v1/metrics", None).json();
    let together: Vec<String> = std::thread::scope(|sc| {
        let hs: Vec<_> = SUBJECTS
            .iter()
            .map(|s| {
                let server = &server;
                sc.spawn(move || {
                    streamed_text(&server.request(
                        "POST",
                        "/v1/chat/completions",
                        Some(&body(s, true)),
                    ))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, (a, b)) in alone.iter().zip(&together).enumerate() {
        assert!(!a.is_empty());
        assert_eq!(a, b, "request {i} ({}) differs when batched", SUBJECTS[i]);
    }
    // Sharing steps: one by one, every generated token costs a step of its own (the first
    // one comes from the prefill step); batched, the 16 requests need far fewer steps.
    let after = server.request("GET", "/v1/metrics", None).json();
    let delta = |k: &str| after[k].as_u64().unwrap() - before[k].as_u64().unwrap();
    let (steps, tokens) = (delta("steps_total"), delta("generation_tokens_total"));
    assert!(tokens >= 16, "{tokens} tokens");
    assert!(
        steps < tokens / 2,
        "{steps} steps for {tokens} tokens: requests did not share steps"
    );
}

fn stream_request(server: &Server, extra: Value) -> std::net::TcpStream {
    let mut b = json!({"model": "smol", "prompt": "Once upon a time", "max_tokens": 200,
                       "temperature": 0, "stream": true, "ignore_eos": true});
    b.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let mut s = server.connect().unwrap();
    send(
        &mut s,
        "POST",
        "/v1/completions",
        Some(b.to_string().as_bytes()),
        &[],
    )
    .unwrap();
    s
}

/// Reads until the response has produced its first SSE frame.
fn read_first_frame(s: &mut std::net::TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    while !String::from_utf8_lossy(&buf).contains("data:") {
        let n = s.read(&mut chunk).unwrap();
        assert!(
            n > 0,
            "connection closed: {}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn poll(server: &Server, what: &str, f: impl Fn(&Value) -> bool) {
    for _ in 0..6000 {
        let m = server.request("GET", "/v1/metrics", None).json();
        if f(&m) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("never reached: {what}");
}

#[test]
fn full_queue_is_429_and_disconnect_cancels() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let server = Server::start(
        &model,
        &[
            "--ctx",
            "512",
            "--parallel",
            "1",
            "--queue",
            "1",
            "--alias",
            "smol",
        ],
    );
    let mut a = stream_request(&server, json!({}));
    read_first_frame(&mut a);
    let b = stream_request(&server, json!({"prompt": "In a land far away"}));
    poll(&server, "one waiting", |m| m["requests_waiting"] == 1);
    let c = server.request(
        "POST",
        "/v1/completions",
        Some(&json!({"model": "smol", "prompt": "Hi", "max_tokens": 2}).to_string()),
    );
    assert_eq!(c.status, 429, "{}", c.body);
    assert_eq!(c.header("retry-after"), Some("1"));
    assert_eq!(c.json()["error"]["code"], "queue_full");
    // Dropping A cancels it; B gets the slot; dropping B cancels it too.
    drop(a);
    poll(&server, "A cancelled", |m| {
        m["requests_cancelled_total"] == 1
    });
    poll(&server, "B running", |m| {
        m["requests_running"] == 1 && m["requests_waiting"] == 0
    });
    drop(b);
    poll(&server, "B cancelled", |m| {
        m["requests_cancelled_total"] == 2 && m["requests_running"] == 0
    });
    // Still serving.
    let ok = server.request(
        "POST",
        "/v1/completions",
        Some(&json!({"model": "smol", "prompt": "Hi", "max_tokens": 2}).to_string()),
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
}
