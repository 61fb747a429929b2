//! Model names clients make (`/api/create`, `/api/copy`, `/api/v1/models/alias`) live in the
//! database: another replica on the same Postgres serves them (it re-reads them every 2 s; the
//! tests wait up to 10 s so a loaded machine does not make them flaky), they survive a restart
//! without a models directory, and an old `weft-models.json` is imported once.

use serde_json::{json, Value};
use weft_tests::Client;

use crate::harness::{call, Backend, Db};
use crate::on_both;

on_both!(
    names_survive_a_restart,
    names_survive_a_restart_sqlite,
    names_survive_a_restart_postgres
);

fn post(c: &Client, key: &str, path: &str, body: Value) -> u16 {
    send(c, key, "POST", path, body)
}

/// Ollama's `DELETE /api/delete`.
fn delete(c: &Client, key: &str, model: &str) -> u16 {
    send(c, key, "DELETE", "/api/delete", json!({ "model": model }))
}

fn send(c: &Client, key: &str, method: &str, path: &str, body: Value) -> u16 {
    let r = call(c, key, method, path, Some(&body.to_string()));
    assert!(r.status == 200 || r.status == 404, "{path}: {}", r.body);
    r.status
}

/// One token from `model` through Ollama's `/api/generate`: 200, or 404 for an unknown name.
fn generate(c: &Client, key: &str, model: &str) -> u16 {
    post(
        c,
        key,
        "/api/generate",
        json!({"model": model, "stream": false, "prompt": "Hi", "options": {"num_predict": 1}}),
    )
}

/// The names `/api/tags` lists.
fn tags(c: &Client, key: &str) -> Vec<String> {
    let r = call(c, key, "GET", "/api/tags", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect()
}

/// Makes one name each way on `c`.
fn make_names(c: &Client, key: &str) {
    let copy = json!({"source": "smol", "destination": "smol-copy"});
    assert_eq!(post(c, key, "/api/copy", copy), 200);
    let create = json!({"model": "smol-brief", "from": "smol", "system": "Answer in one word.", "stream": false});
    assert_eq!(post(c, key, "/api/create", create), 200);
    let alias = json!({"alias": "smol-alias", "model": "smol"});
    assert_eq!(post(c, key, "/api/v1/models/alias", alias), 200);
}

const MADE: [&str; 3] = ["smol-copy", "smol-brief", "smol-alias"];

#[test]
fn names_reach_the_other_replica() {
    let Some(db) = Db::new(Backend::Postgres, "aliases-replicas") else {
        return;
    };
    let admin = "weft_shared-bootstrap-key-of-both-replicas-0003";
    let a = db.serve_env(&[], &[("WEFT_ADMIN_KEY", admin)]);
    let b = db.serve_env(&[], &[("WEFT_ADMIN_KEY", admin)]);
    let (ca, cb) = (a.client(), b.client());
    assert_eq!(generate(&cb, admin, "smol-brief"), 404);
    make_names(&ca, admin);
    assert!(
        eventually(|| MADE.iter().all(|m| generate(&cb, admin, m) == 200)),
        "B never served A's names; B lists {:?}",
        tags(&cb, admin)
    );
    // With the overrides they were made with.
    let r = call(
        &cb,
        admin,
        "POST",
        "/api/show",
        Some(r#"{"model": "smol-brief"}"#),
    );
    assert_eq!(r.json()["system"], "Answer in one word.", "{}", r.body);
    // A delete on B reaches A.
    assert_eq!(delete(&cb, admin, "smol-copy"), 200);
    assert!(
        eventually(|| generate(&ca, admin, "smol-copy") == 404),
        "A still serves a name deleted on B"
    );
    assert!(!tags(&ca, admin).contains(&"smol-copy:latest".to_string()));
    assert_eq!(generate(&ca, admin, "smol-alias"), 200);
}

fn names_survive_a_restart(db: &Db) {
    let admin = "weft_bootstrap-key-of-the-restarted-server-0004";
    let server = db.serve_env(&[], &[("WEFT_ADMIN_KEY", admin)]);
    make_names(&server.client(), admin);
    drop(server);
    let server = db.serve_env(&[], &[("WEFT_ADMIN_KEY", admin)]);
    let c = server.client();
    for m in MADE {
        assert_eq!(generate(&c, admin, m), 200, "{m} after a restart");
    }
    let listed = tags(&c, admin);
    for m in MADE {
        assert!(listed.contains(&format!("{m}:latest")), "{listed:?}");
    }
}

#[test]
fn an_old_names_file_is_imported_once() {
    let Some(db) = Db::new(Backend::Sqlite, "aliases-import") else {
        return;
    };
    let admin = "weft_bootstrap-key-of-the-importing-server-0005";
    let dir = db.home.join("store");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("weft-models.json");
    let old = json!({"models": {
        "from-file": {"target": {"alias": "smol"}, "origin": "created"},
        "broken-target": {"target": {"alias": "no-such-model"}, "origin": "created"}
    }});
    std::fs::write(&file, old.to_string()).unwrap();
    let dir_arg = dir.display().to_string();
    let server = db.serve_env(&["--models-dir", &dir_arg], &[("WEFT_ADMIN_KEY", admin)]);
    let c = server.client();
    assert_eq!(generate(&c, admin, "from-file"), 200);
    assert!(!file.exists(), "the names file was left in place");
    assert!(dir.join("weft-models.json.imported").is_file());
    // Deleted after the import, it stays deleted across a restart (the file is not read again).
    assert_eq!(delete(&c, admin, "from-file"), 200);
    drop(server);
    let server = db.serve_env(&["--models-dir", &dir_arg], &[("WEFT_ADMIN_KEY", admin)]);
    let c = server.client();
    assert_eq!(generate(&c, admin, "from-file"), 404);
    assert_eq!(generate(&c, admin, "smol"), 200);
}

/// Whether `f` holds within 10 s, trying every 250 ms.
fn eventually(f: impl Fn() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    f()
}
