//! Model jobs in the database: a finished job is still listed after the server restarts, a
//! pull the dead server left running is marked failed ("interrupted by a restart") and the
//! same pull submitted again resumes its partial file with `Range`; and (Postgres) a replica
//! lists, shows and cancels a job another replica runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use weft_core::test_support::model_path;
use weft_tests::hub::{Hub, HubFile};
use weft_tests::{Client, Server};

use crate::harness::{call, Backend, Db};
use crate::on_both;

fn sha256_file(p: &Path) -> String {
    let mut h = Sha256::new();
    std::io::copy(&mut std::fs::File::open(p).unwrap(), &mut h).unwrap();
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A hub serving `model` as `smol.gguf` and, `delay` after every 256 KiB, as `slow.gguf`.
fn hub_with(model: &Path, delay: Option<Duration>) -> Hub {
    let hub = Hub::start();
    add_slow(&hub, model, delay);
    hub.add(
        "test/smol-GGUF",
        "smol.gguf",
        HubFile {
            path: model.to_path_buf(),
            sha256: sha256_file(model),
            ..HubFile::default()
        },
    );
    hub
}

fn add_slow(hub: &Hub, model: &Path, delay: Option<Duration>) {
    hub.add(
        "test/smol-GGUF",
        "slow.gguf",
        HubFile {
            path: model.to_path_buf(),
            sha256: sha256_file(model),
            delay,
            ..HubFile::default()
        },
    );
}

fn serve(db: &Db, store: &Path, hub: &Hub) -> Server {
    std::fs::create_dir_all(store).unwrap();
    db.serve(&[
        "--models-dir",
        &store.display().to_string(),
        "--hf-endpoint",
        &hub.base(),
        // The test hub is on loopback, which pulls may not reach by default.
        "--pull-allow-private",
    ])
}

fn start_pull(c: &Client, file: &str) -> String {
    let body = json!({"model": format!("hf.co/test/smol-GGUF:{file}")}).to_string();
    let r = call(c, "", "POST", "/api/v1/models/pull", Some(&body));
    assert_eq!(r.status, 202, "{}", r.body);
    r.json()["job_id"].as_str().unwrap().to_string()
}

fn job(c: &Client, id: &str) -> Value {
    let r = call(c, "", "GET", &format!("/api/v1/models/jobs/{id}"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn listed(c: &Client, id: &str) -> Option<Value> {
    let r = call(c, "", "GET", "/api/v1/jobs", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id)
        .cloned()
}

/// Polls `f` every 100 ms until it gives a value; panics with `what` after `secs`.
fn until<T>(secs: u64, what: &str, f: impl Fn() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ended(j: &Value) -> bool {
    ["succeeded", "failed", "cancelled"].contains(&j["status"].as_str().unwrap_or(""))
}

/// Waits until job `id` has stored some progress (the database copy is written at most once a
/// second for progress alone, so this waits for the row, not the memory).
fn wait_for_progress(c: &Client, id: &str) {
    until(60, "the slow pull never progressed", || {
        let j = job(c, id);
        (j["progress"]["done"].as_u64().unwrap_or(0) > 0).then_some(())
    });
    std::thread::sleep(Duration::from_millis(1500));
}

fn jobs_survive_a_restart(db: &Db) {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let hub = hub_with(&model, Some(Duration::from_millis(40)));
    let store: PathBuf = db.home.join("store");
    let a = serve(db, &store, &hub);
    let ca = a.client();
    let done = start_pull(&ca, "smol.gguf");
    until(120, "the pull did not end", || {
        let j = job(&ca, &done);
        ended(&j).then_some(())
    });
    let slow = start_pull(&ca, "slow.gguf");
    wait_for_progress(&ca, &slow);
    drop(a); // SIGKILL: the pull is cut and its thread dies with the process

    add_slow(&hub, &model, None);
    let b = serve(db, &store, &hub);
    let cb = b.client();
    let j = listed(&cb, &done).expect("the finished job is listed after the restart");
    assert_eq!(j["status"], "succeeded", "{j}");
    assert_eq!(j["kind"], "pull");
    assert_eq!(j["request"]["model"], "hf.co/test/smol-GGUF:smol.gguf");
    assert_eq!(j["result"]["name"], "smol", "{j}");
    assert!(j["finished_at"].as_f64().unwrap() >= j["started_at"].as_f64().unwrap());
    // SQLite marks it at start; Postgres when a live replica finds the dead owner's lock free.
    let j = until(30, "the cut pull was never marked interrupted", || {
        let j = listed(&cb, &slow).expect("the cut job is listed");
        ended(&j).then_some(j)
    });
    assert_eq!(j["status"], "failed", "{j}");
    let error = j["error"].as_str().unwrap();
    assert!(error.contains("interrupted by a restart"), "{j}");
    assert!(error.contains("resume"), "{j}");
    assert!(j["progress"]["done"].as_u64().unwrap() > 0, "{j}");
    assert_eq!(job(&cb, &slow)["status"], "failed");

    // The same pull again resumes the partial file the dead server left.
    let again = start_pull(&cb, "slow.gguf");
    let j = until(120, "the resumed pull did not end", || {
        let j = job(&cb, &again);
        ended(&j).then_some(j)
    });
    assert_eq!(j["status"], "succeeded", "{j}");
    assert_eq!(j["result"]["verified"], true, "{j}");
    assert!(j["result"]["resumed"].as_u64().unwrap() >= 1, "{j}");
    let resumed = hub.log().iter().any(|l| {
        l.path.contains("slow.gguf") && l.range.as_deref().is_some_and(|r| r != "bytes=0-")
    });
    assert!(
        resumed,
        "no Range request resumed the partial file: {:?}",
        hub.log()
    );
}
on_both!(
    jobs_survive_a_restart,
    jobs_survive_a_restart_sqlite,
    jobs_survive_a_restart_postgres
);

#[test]
fn a_replica_lists_shows_and_cancels_another_replicas_job() {
    let Some(db) = Db::new(Backend::Postgres, "jobs-replicas") else {
        return;
    };
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let hub = hub_with(&model, Some(Duration::from_millis(40)));
    let a = serve(&db, &db.home.join("store-a"), &hub);
    let b = serve(&db, &db.home.join("store-b"), &hub);
    let (ca, cb) = (a.client(), b.client());
    let id = start_pull(&ca, "slow.gguf");
    // The 202 comes once the job is in the database, so B lists it at once.
    let j = listed(&cb, &id).expect("B lists A's job");
    assert_eq!(j["kind"], "pull");
    assert_eq!(
        job(&cb, &id)["request"]["model"],
        "hf.co/test/smol-GGUF:slow.gguf"
    );
    // B reads the database: A's progress reaches it (written at most once a second).
    let on_b = until(60, "A's progress never reached B", || {
        let j = job(&cb, &id);
        (j["progress"]["done"].as_u64().unwrap_or(0) > 0).then_some(j)
    });
    assert_eq!(on_b["status"], "running", "{on_b}");

    let r = call(&cb, "", "POST", &format!("/api/v1/jobs/{id}/cancel"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["cancel_requested"], true, "{}", r.body);
    let j = until(30, "A never cancelled the job B asked to stop", || {
        let j = job(&cb, &id);
        ended(&j).then_some(j)
    });
    assert_eq!(j["status"], "cancelled", "{j}");
    assert_eq!(job(&ca, &id)["status"], "cancelled");
    let r = call(&cb, "", "POST", "/api/v1/jobs/job-none/cancel", None);
    assert_eq!(r.status, 404, "{}", r.body);
}
