//! The model registry of `weft serve`: several models by name in one server, loaded on first
//! use, at most `--max-loaded` resident, evicted least-recently-used when idle, `keep_alive`,
//! names made by clients (create, copy, alias, delete), and clear errors for bad input.
//!
//! Each model's greedy replies are first taken from a server holding only that model; the
//! multi-model server must give the same replies.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use weft_core::test_support::model_path;
use weft_tests::{python, send, Server};

const KEYS: [&str; 3] = ["smollm2", "gemma3", "qwen2"];

/// The three reference models, or None (after a loud message) outside CI when one is missing.
fn models() -> Option<Vec<(&'static str, PathBuf)>> {
    KEYS.iter()
        .map(|k| model_path(k).map(|p| (*k, p)))
        .collect()
}

/// A fresh models directory holding links to the models (so deleting a name there never
/// touches the real files), plus `extra` files.
fn models_dir(models: &[(&str, PathBuf)], tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-registry-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (_, p) in models {
        std::os::unix::fs::symlink(p, dir.join(p.file_name().unwrap())).unwrap();
    }
    dir
}

fn name_of(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

fn chat_body(model: &str, prompt: &str, n: usize) -> String {
    json!({"model": model, "stream": false,
           "messages": [{"role": "user", "content": prompt}],
           "options": {"temperature": 0, "num_predict": n}})
    .to_string()
}

const PROMPT: &str = "Name three colors.";

/// Greedy reply of a model on a server holding only it.
fn reference_replies(models: &[(&str, PathBuf)]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (_, p) in models {
        let s = Server::start(p, &["--ctx", "512", "--parallel", "2"]);
        let name = name_of(p);
        let r = s.request("POST", "/api/chat", Some(&chat_body(&name, PROMPT, 12)));
        assert_eq!(r.status, 200, "{}", r.body);
        let text = r.json()["message"]["content"].as_str().unwrap().to_string();
        assert!(!text.is_empty());
        out.insert(name, text);
    }
    out
}

fn args(dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut a = vec![
        "--models-dir".to_string(),
        dir.display().to_string(),
        "--ctx".into(),
        "512".into(),
        "--parallel".into(),
        "2".into(),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn resident(s: &Server) -> Vec<String> {
    let ps = s.request("GET", "/api/ps", None).json();
    ps["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect()
}

/// Waits (bounded) until `cond` holds; the registry unloads on its own thread.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn ollama_client_drives_three_models_in_one_server() {
    let Some(models) = models() else { return };
    let expected = reference_replies(&models);
    let dir = models_dir(&models, "client");
    // A private WEFT_HOME: the names the client makes live in the admin database there.
    let home = dir.join("home");
    let env = [("WEFT_HOME", home.as_path())];
    let server = Server::start_env(&args(&dir, &["--max-loaded", "2"]), &env);
    let exp = serde_json::to_string(&expected).unwrap();
    if let Some(out) = python(
        "registry_client.py",
        &server.base(),
        &[&exp, PROMPT],
        &["ollama", "requests"],
    ) {
        assert!(out.contains("ALL OK"), "{out}");
    }
    // Names made by the client were saved in the database and outlive a restart.
    drop(server);
    assert!(
        home.join("weft.db").is_file(),
        "no database in {}",
        home.display()
    );
    let server = Server::start_env(&args(&dir, &["--max-loaded", "1"]), &env);
    let tags = server.request("GET", "/api/tags", None).json().to_string();
    assert!(tags.contains("pirate:latest"), "{tags}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads one streamed Ollama chat to its end, returning the text and the final frame.
fn read_stream(reader: &mut impl BufRead) -> (String, Value) {
    let mut text = String::new();
    for line in reader.lines() {
        let line = line.unwrap();
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue; // chunk sizes and headers
        };
        if let Some(t) = v["message"]["content"].as_str() {
            text.push_str(t);
        }
        if v["done"] == json!(true) {
            return (text, v);
        }
        assert!(v.get("error").is_none(), "stream failed: {v}");
    }
    panic!("stream ended without a final frame; text so far {text:?}");
}

#[test]
fn a_stream_survives_the_eviction_of_its_model() {
    let Some(models) = models() else { return };
    let dir = models_dir(&models[..2], "evict");
    let (a, b) = (name_of(&models[0].1), name_of(&models[1].1));
    let server = Server::start_args(&args(&dir, &["--max-loaded", "1"]));
    // The reference: A's whole reply, undisturbed.
    let long = |m: &str, stream: bool| {
        json!({"model": m, "stream": stream, "messages": [{"role": "user", "content": "Tell me a story about a cat."}],
               "options": {"temperature": 0, "num_predict": 64}})
        .to_string()
    };
    let want = server
        .request("POST", "/api/chat", Some(&long(&a, false)))
        .json()["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    // A streams; once its first token is here, B asks for the only place.
    let mut conn = server.connect().unwrap();
    send(
        &mut conn,
        "POST",
        "/api/chat",
        Some(long(&a, true).as_bytes()),
        &[],
    )
    .unwrap();
    let mut reader = BufReader::new(conn);
    let mut first = String::new();
    while !first.contains("\"content\"") {
        first.clear();
        reader.read_line(&mut first).unwrap();
    }
    let port = server.port;
    let b2 = b.clone();
    let other = std::thread::spawn(move || {
        let s = Server::attach(port);
        s.request("POST", "/api/chat", Some(&chat_body(&b2, PROMPT, 4)))
    });
    let first_text = serde_json::from_str::<Value>(first.trim()).unwrap()["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let (rest, last) = read_stream(&mut reader);
    assert_eq!(format!("{first_text}{rest}"), want, "A's stream changed");
    assert_eq!(last["done_reason"], "length");
    let r = other.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    eventually("only B resident", || {
        resident(&server) == vec![format!("{b}:latest")]
    });
    let _ = std::fs::remove_dir_all(&dir);
}

fn peak_rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let l = s.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    l.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn twelve_clients_mixing_three_models_with_one_place() {
    let Some(models) = models() else { return };
    let expected = reference_replies(&models);
    // The largest model's resident size, alone.
    let largest = models
        .iter()
        .max_by_key(|(_, p)| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let alone = {
        let s = Server::start(&largest.1, &["--ctx", "512", "--parallel", "2"]);
        let r = s.request(
            "POST",
            "/api/chat",
            Some(&chat_body(&name_of(&largest.1), PROMPT, 12)),
        );
        assert_eq!(r.status, 200);
        peak_rss_kib(s.pid())
    };
    let dir = models_dir(&models, "mix");
    let server = Server::start_args(&args(&dir, &["--max-loaded", "1"]));
    let secs: u64 = std::env::var("WEFT_MIX_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let names: Arc<Vec<String>> = Arc::new(expected.keys().cloned().collect());
    let expected = Arc::new(expected);
    let done = Arc::new(AtomicUsize::new(0));
    let port = server.port;
    let clients: Vec<_> = (0..12)
        .map(|c| {
            let (names, expected, done) = (names.clone(), expected.clone(), done.clone());
            std::thread::spawn(move || {
                let s = Server::attach(port);
                let mut k = c;
                while Instant::now() < deadline {
                    let m = &names[k % names.len()];
                    k += 1 + c % 2;
                    let r = s.request("POST", "/api/chat", Some(&chat_body(m, PROMPT, 12)));
                    assert_eq!(r.status, 200, "client {c}, model {m}: {}", r.body);
                    let text = r.json()["message"]["content"].as_str().unwrap().to_string();
                    assert_eq!(&text, &expected[m], "client {c}, model {m}");
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("a client failed");
    }
    let mixed = peak_rss_kib(server.pid());
    let n = done.load(Ordering::Relaxed);
    eprintln!("mixed: {n} requests in {secs} s; peak RSS {mixed} KiB vs {alone} KiB alone");
    assert!(n >= 12, "only {n} requests completed");
    assert!(
        (mixed as f64) < alone as f64 * 1.25,
        "peak RSS {mixed} KiB with three models and --max-loaded 1; the largest alone: {alone} KiB"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_gets_clear_errors() {
    let Some(models) = models() else { return };
    let dir = models_dir(&models[..1], "bad");
    std::fs::write(dir.join("broken.gguf"), b"GGUF\x03\x00\x00\x00 truncated").unwrap();
    let name = name_of(&models[0].1);
    let server = Server::start_args(&args(&dir, &["--max-loaded", "1"]));
    let post = |path: &str, body: Value| server.request("POST", path, Some(&body.to_string()));

    // Unknown model: 404 naming what exists, on every surface.
    let r = post(
        "/api/chat",
        json!({"model": "nope", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(r.status, 404);
    assert!(
        r.json()["error"].as_str().unwrap().contains(&name),
        "{}",
        r.body
    );
    let r = post(
        "/v1/chat/completions",
        json!({"model": "nope", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], "model_not_found");
    // The corrupt file is listed as broken; using it is a 503 with the reason, not a crash.
    let tags = server.request("GET", "/api/tags", None).json();
    let broken = tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "broken:latest")
        .expect("broken model listed");
    assert!(
        broken["broken"].as_str().unwrap().contains("GGUF"),
        "{broken}"
    );
    let r = post("/api/generate", json!({"model": "broken", "prompt": "hi"}));
    assert_eq!(r.status, 503, "{}", r.body);
    // keep_alive garbage.
    for ka in [json!("soon"), json!(true), json!("5x")] {
        let r = post(
            "/api/generate",
            json!({"model": name, "prompt": "hi", "keep_alive": ka}),
        );
        assert_eq!(r.status, 400, "keep_alive {ka}: {}", r.body);
        assert!(r.json()["error"].as_str().unwrap().contains("keep_alive"));
    }
    // Create from an unknown model; names that could be paths.
    let r = post(
        "/api/create",
        json!({"model": "x", "from": "nope", "stream": false}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    for bad in ["a/b", "../up", "..", "a b"] {
        let r = post(
            "/api/create",
            json!({"model": bad, "from": name, "stream": false}),
        );
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        let r = post("/api/copy", json!({"source": name, "destination": bad}));
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    let r = post(
        "/api/create",
        json!({"model": "t", "from": name, "template": "{% if %}", "stream": false}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let r = post(
        "/api/create",
        json!({"model": "t", "from": name, "parameters": {"temperature": "hot"}, "stream": false}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    // An unknown message role is a 400 on /v1.
    let r = post(
        "/v1/chat/completions",
        json!({"model": name, "messages": [{"role": "wizard", "content": "hi"}]}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("wizard"));

    // Deleting a model while a stream uses it: the stream ends intact, then the model goes.
    post("/api/copy", json!({"source": name, "destination": "mine"}));
    let mut conn = server.connect().unwrap();
    let body = json!({"model": "mine", "stream": true, "messages": [{"role": "user", "content": "Tell me a story."}],
                      "options": {"temperature": 0, "num_predict": 48}});
    send(
        &mut conn,
        "POST",
        "/api/chat",
        Some(body.to_string().as_bytes()),
        &[],
    )
    .unwrap();
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    while !line.contains("\"content\"") {
        line.clear();
        reader.read_line(&mut line).unwrap();
    }
    let r = server.request(
        "DELETE",
        "/api/delete",
        Some(&json!({"model": "mine"}).to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = server.request(
        "DELETE",
        "/api/delete",
        Some(&json!({"model": "mine"}).to_string()),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    let (_, last) = read_stream(&mut reader);
    assert_eq!(last["done_reason"], "length", "{last}");
    // The file's own name still works (a copy's deletion never removes a shared file).
    let r = post(
        "/api/generate",
        json!({"model": name, "prompt": "hi", "stream": false, "options": {"num_predict": 2}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(dir.join(models[0].1.file_name().unwrap()).exists());
    // Deleting the file's name removes the link from the models directory once idle.
    let r = server.request(
        "DELETE",
        "/api/delete",
        Some(&json!({"model": name}).to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    eventually("the link is gone", || {
        !dir.join(models[0].1.file_name().unwrap()).exists()
    });
    assert!(models[0].1.exists(), "the real model file must survive");
    eventually("nothing resident", || resident(&server).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
