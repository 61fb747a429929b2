//! Model jobs through `weft serve`: pull, import and quantize as jobs on
//! `/api/v1/models/...`, job status and listing, cancel, 400s for bad requests, Ollama
//! `/api/pull` with the official client's streamed progress, and the pulled model served.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use weft_core::test_support::model_path;
use weft_tests::hub::{Hub, HubFile};
use weft_tests::{python, Server};

fn sha256_file(p: &Path) -> String {
    let mut h = Sha256::new();
    std::io::copy(&mut std::fs::File::open(p).unwrap(), &mut h).unwrap();
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-jobs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Polls a job until it ends.
fn wait_job(s: &Server, id: &str) -> Value {
    let t0 = Instant::now();
    loop {
        let r = s.request("GET", &format!("/api/v1/models/jobs/{id}"), None);
        assert_eq!(r.status, 200, "{}", r.body);
        let j = r.json();
        if ["succeeded", "failed", "cancelled"].contains(&j["status"].as_str().unwrap()) {
            return j;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "job {id} did not end: {j}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn start(s: &Server, path: &str, body: Value) -> String {
    let r = s.request("POST", path, Some(&body.to_string()));
    assert_eq!(r.status, 202, "{path}: {}", r.body);
    r.json()["job_id"].as_str().unwrap().to_string()
}

#[test]
fn model_jobs_over_http() {
    let Some(small) = model_path("smollm2") else {
        return;
    };
    let hub = Hub::start();
    let sha = sha256_file(&small);
    hub.add(
        "test/smol-GGUF",
        "smol.gguf",
        HubFile {
            path: small.clone(),
            sha256: sha.clone(),
            ..HubFile::default()
        },
    );
    hub.add(
        "test/smol-GGUF",
        "slow.gguf",
        HubFile {
            path: small.clone(),
            sha256: sha.clone(),
            delay: Some(Duration::from_millis(50)),
            ..HubFile::default()
        },
    );
    let dir = scratch("http");
    let store = dir.join("models");
    std::fs::create_dir_all(&store).unwrap();
    std::os::unix::fs::symlink(&small, store.join("base.gguf")).unwrap();
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::copy(&small, outside.join("imported.gguf")).unwrap();
    let s = Server::start_args(&[
        "--models-dir".into(),
        store.display().to_string(),
        "--hf-endpoint".into(),
        hub.base(),
        // The test hub is on loopback, which pulls may not reach by default.
        "--pull-allow-private".into(),
        "--ctx".into(),
        "512".into(),
        "--parallel".into(),
        "1".into(),
    ]);

    // Pull: a job that succeeds, verified, and the model is served at once.
    let id = start(
        &s,
        "/api/v1/models/pull",
        json!({"model": "hf.co/test/smol-GGUF:smol.gguf", "name": "pulled"}),
    );
    let j = wait_job(&s, &id);
    assert_eq!(j["status"], "succeeded", "{j}");
    assert_eq!(j["kind"], "pull");
    assert_eq!(j["result"]["sha256"], sha);
    assert_eq!(j["result"]["verified"], true);
    assert_eq!(j["progress"]["percent"], 100.0);
    assert!(j["started_at"].as_f64().unwrap() <= j["finished_at"].as_f64().unwrap());
    let tags = s.request("GET", "/api/tags", None).json();
    assert!(
        tags["models"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "pulled:latest"),
        "{tags}"
    );
    let chat = json!({"model": "pulled", "stream": false, "messages": [{"role": "user", "content": "Hi"}],
                      "options": {"temperature": 0, "num_predict": 3}});
    let r = s.request("POST", "/api/chat", Some(&chat.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);

    // A failing job keeps its message; nothing lands in the store.
    let id = start(
        &s,
        "/api/v1/models/pull",
        json!({"model": "hf.co/test/smol-GGUF:smol.gguf", "name": "bad", "sha256": "1".repeat(64)}),
    );
    let j = wait_job(&s, &id);
    assert_eq!(j["status"], "failed");
    assert!(
        j["error"].as_str().unwrap().contains("sha256 mismatch"),
        "{j}"
    );
    assert!(!store.join("bad.gguf").exists());

    // Cancel mid-transfer.
    let id = start(
        &s,
        "/api/v1/models/pull",
        json!({"model": "hf.co/test/smol-GGUF:slow.gguf"}),
    );
    let t0 = Instant::now();
    loop {
        let j = s
            .request("GET", &format!("/api/v1/models/jobs/{id}"), None)
            .json();
        if j["progress"]["done"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no progress: {j}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = s.request("POST", &format!("/api/v1/jobs/{id}/cancel"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let j = wait_job(&s, &id);
    assert_eq!(j["status"], "cancelled", "{j}");
    assert!(!store.join("slow.gguf").exists());
    let partial: Vec<_> = std::fs::read_dir(store.join(".weft-partial"))
        .unwrap()
        .collect();
    assert!(partial.is_empty(), "{partial:?}");

    // Quantize a model of the store.
    let id = start(
        &s,
        "/api/v1/models/quantize",
        json!({"model": "base", "name": "base-q8", "type": "q8_0", "allow_requantize": true}),
    );
    let j = wait_job(&s, &id);
    assert_eq!(j["status"], "succeeded", "{j}");
    assert!(s
        .request("GET", "/api/tags", None)
        .body
        .contains("base-q8:latest"));

    // Bad requests: 400 with a message, no job.
    let bad = [
        (
            "/api/v1/models/pull",
            json!({"model": "ftp://x/y.gguf"}),
            "unknown model reference",
        ),
        (
            "/api/v1/models/pull",
            json!({"model": "hf.co/a/b:c.gguf", "name": "../x"}),
            "'..'",
        ),
        (
            "/api/v1/models/pull",
            json!({"nothing": 1}),
            "invalid request",
        ),
        (
            "/api/v1/models/quantize",
            json!({"model": "base", "type": "q3_k_xl"}),
            "unsupported quantization type",
        ),
        (
            "/api/v1/models/import",
            json!({"path": outside.join("imported.gguf")}),
            "outside the allowed import roots",
        ),
        (
            "/api/v1/models/import",
            json!({"path": store.join("..").join("outside").join("imported.gguf")}),
            "outside the allowed import roots",
        ),
    ];
    let jobs_before = s.request("GET", "/api/v1/jobs", None).json()["jobs"]
        .as_array()
        .unwrap()
        .len();
    for (path, body, want) in bad {
        let r = s.request("POST", path, Some(&body.to_string()));
        assert_eq!(r.status, 400, "{path} {body}: {}", r.body);
        assert!(
            r.json()["error"].as_str().unwrap().contains(want),
            "{path}: {}",
            r.body
        );
    }
    let jobs = s.request("GET", "/api/v1/jobs", None).json();
    assert_eq!(
        jobs["jobs"].as_array().unwrap().len(),
        jobs_before,
        "{jobs}"
    );
    assert_eq!(
        s.request("GET", "/api/v1/models/jobs/job-nope", None)
            .status,
        404
    );
    assert_eq!(
        s.request("POST", "/api/v1/jobs/job-nope/cancel", None)
            .status,
        404
    );

    // Ollama's client pulls with progress, and the server still serves.
    if let Some(out) = python(
        "pull_client.py",
        &s.base(),
        &["hf.co/test/smol-GGUF:smol.gguf", "smol"],
        &["ollama"],
    ) {
        assert!(out.contains("ok the last line is success"), "{out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
