//! The reference peer's shapes that were missing (issue 33, item 10): `POST /api/v1/backup`
//! (its method; `GET` stays) and `POST /api/v1/models/library` (add a library entry: a name
//! for a GGUF file already on the server, inside the models folder or an import root).

use serde_json::json;
use weft_core::test_support::model_path;
use weft_tests::Client;

use crate::harness::{api_key, call, Db};
use crate::on_both;

on_both!(
    backup_by_post,
    backup_by_post_sqlite,
    backup_by_post_postgres
);
on_both!(
    library_entries,
    library_entries_sqlite,
    library_entries_postgres
);

/// Whether `body` (read as lossy UTF-8) is a ZIP holding the backup's manifest.
fn is_backup_zip(body: &str) -> bool {
    body.starts_with("PK\u{3}\u{4}") && body.contains("manifest.json")
}

fn backup_by_post(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let (_, user) = api_key(&c, &admin, json!({"name": "u", "role": "user"}));
    for method in ["POST", "GET"] {
        let r = call(&c, &admin, method, "/api/v1/backup", None);
        assert_eq!(
            r.status,
            200,
            "{method}: {}",
            r.body.get(..200).unwrap_or("")
        );
        assert_eq!(
            r.header("content-type"),
            Some("application/zip"),
            "{method}"
        );
        assert!(
            r.header("content-disposition")
                .is_some_and(|d| d.contains("weft-backup-")),
            "{method}: {:?}",
            r.headers
        );
        assert!(is_backup_zip(&r.body), "{method}: not a backup ZIP");
        let r = call(&c, &user, method, "/api/v1/backup", None);
        assert_eq!(r.status, 403, "{method} as user: {}", r.body);
        let r = call(&c, "", method, "/api/v1/backup", None);
        assert_eq!(r.status, 401, "{method} without a key: {}", r.body);
    }
    // Taking a backup is audited, by either method.
    let audit = call(&c, &admin, "GET", "/api/v1/audit?limit=1000", None).json();
    let rows = audit["data"].as_array().unwrap();
    for method in ["POST", "GET"] {
        assert!(
            rows.iter().any(|a| a["route"] == "/api/v1/backup"
                && a["method"] == method
                && a["status"] == 200
                && a["actor"].as_str().is_some_and(|s| s.starts_with("key_"))),
            "no audit row for {method} /api/v1/backup: {rows:?}"
        );
    }
}

/// The library's entry named `name`, if listed.
fn listed(c: &Client, admin: &str, name: &str) -> Option<serde_json::Value> {
    let r = call(c, admin, "GET", "/api/v1/models/library", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .cloned()
}

fn library_entries(db: &Db) {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let store = db.home.join("store");
    std::fs::create_dir_all(&store).unwrap();
    // Inside the models folder: a text file, and a file named .gguf that is not one.
    std::fs::write(store.join("notes.txt"), "not a model").unwrap();
    std::fs::write(store.join("fake.gguf"), "GGUF but not really").unwrap();
    let root = model.parent().unwrap().canonicalize().unwrap();
    let args = [
        "--models-dir",
        store.to_str().unwrap(),
        "--import-root",
        root.to_str().unwrap(),
    ];
    let admin = db.cli_key("admin");
    let server = db.serve(&args);
    let c = server.client();
    let (_, user) = api_key(&c, &admin, json!({"name": "u", "role": "user"}));
    let path = model.canonicalize().unwrap().display().to_string();
    let add = |key: &str, body: serde_json::Value| {
        call(
            &c,
            key,
            "POST",
            "/api/v1/models/library",
            Some(&body.to_string()),
        )
    };

    // Only an admin may add an entry.
    let r = add(&user, json!({"name": "lib-smol", "path": path}));
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(listed(&c, &admin, "lib-smol").is_none());

    let r = add(&admin, json!({"name": "lib-smol", "path": path}));
    assert_eq!(r.status, 201, "{}", r.body);
    let j = r.json();
    assert_eq!(j["name"], "lib-smol");
    assert_eq!(j["origin"], "created");
    assert_eq!(j["architecture"], "llama", "{j}");
    assert!(j["size"].as_u64().unwrap() > 1_000_000, "{j}");
    assert!(
        !r.body.contains(&path),
        "the answer names a file: {}",
        r.body
    );
    let e = listed(&c, &admin, "lib-smol").expect("the new entry is listed");
    assert_eq!(e["origin"], "created", "{e}");
    assert!(e["broken"].is_null(), "{e}");

    // The name serves: a generation on it.
    let chat = json!({"model": "lib-smol", "max_tokens": 2,
        "messages": [{"role": "user", "content": "Hi"}]});
    let r = call(
        &c,
        &user,
        "POST",
        "/v1/chat/completions",
        Some(&chat.to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);

    // Refusals, none of which names a server folder.
    let home = db.home.canonicalize().unwrap().display().to_string();
    let cases = [
        (json!({"name": "lib-smol", "path": path}), 409, "already"),
        (json!({"name": "smol", "path": path}), 409, "already"),
        (
            json!({"name": "x1", "path": "/etc/hostname"}),
            400,
            "import root",
        ),
        (
            json!({"name": "x2", "path": "../../../../../../../../etc/hostname"}),
            400,
            "import root",
        ),
        (json!({"name": "x3", "path": "notes.txt"}), 400, ".gguf"),
        (json!({"name": "x4", "path": "fake.gguf"}), 400, ""),
        (
            json!({"name": "x5", "path": "missing.gguf"}),
            400,
            "readable",
        ),
        (
            json!({"name": "../x6", "path": path}),
            400,
            "invalid model name",
        ),
        (
            json!({"name": "x7", "path": path, "url": "http://x"}),
            400,
            "",
        ),
        (json!({"name": "x8"}), 400, ""),
    ];
    for (body, status, words) in cases {
        let r = add(&admin, body.clone());
        assert_eq!(r.status, status, "{body}: {}", r.body);
        let msg = r.json()["error"].as_str().unwrap_or("").to_string();
        assert!(msg.contains(words), "{body}: {msg}");
        assert!(
            !msg.contains(&home),
            "{body}: the error names a folder: {msg}"
        );
    }
    for n in ["x1", "x2", "x3", "x4", "x5", "x7", "x8"] {
        assert!(listed(&c, &admin, n).is_none(), "{n} was added");
    }

    // The entry is in the database: a restarted server still has it.
    drop(server);
    let server = db.serve(&args);
    let c = server.client();
    let e = listed(&c, &admin, "lib-smol").expect("the entry survives a restart");
    assert_eq!(e["origin"], "created", "{e}");
    assert!(e["broken"].is_null(), "{e}");
    // Deleting the name leaves the file (it is outside the models folder).
    let r = call(
        &c,
        &admin,
        "DELETE",
        "/api/delete",
        Some(r#"{"model": "lib-smol"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(model.exists());
    assert!(listed(&c, &admin, "lib-smol").is_none());
}
