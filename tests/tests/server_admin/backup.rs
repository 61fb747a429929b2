//! Backup and restore: a backup restored after changes gives back the same state (keys
//! authenticate again, settings, users, tenants, audit), through a multipart or a raw body;
//! malicious or broken archives are refused with the documented status and nothing changed;
//! a SQLite backup restores into Postgres and back.

use serde_json::{json, Value};

use crate::harness::{api_key, call, Backend, Db};
use crate::on_both;
use crate::zips::{self, backup, restore, restore_multipart, signed, tables, zip_of};
use weft_tests::Client;

on_both!(round_trip, round_trip_sqlite, round_trip_postgres);
on_both!(malicious, malicious_sqlite, malicious_postgres);

const ENV_ADMIN: &str = "weft_env-admin-key-for-the-backup-tests-000001";

/// Tenants, a user, keys and settings to back up; returns the user key.
fn populate(c: &Client, admin: &str) -> String {
    let r = call(
        c,
        admin,
        "POST",
        "/api/v1/tenants",
        Some(r#"{"name": "acme", "models": ["smol"], "token_quota": 5000}"#),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let tenant = r.json()["id"].as_str().unwrap().to_string();
    let body = json!({"name": "ann", "password": "correct horse battery", "role": "user", "tenant": tenant});
    let r = call(c, admin, "POST", "/api/v1/users", Some(&body.to_string()));
    assert_eq!(r.status, 201, "{}", r.body);
    let (_, user) = api_key(
        c,
        admin,
        json!({"name": "ann-key", "role": "user", "tenant": tenant, "rate_limit_rpm": 1000}),
    );
    let r = call(
        c,
        admin,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"temperature": 0.3, "top_k": 7}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    user
}

/// What the admin API shows (the audit log without backup and restore rows, which a
/// refused restore adds by design).
fn state(c: &Client, admin: &str) -> Value {
    let get = |p: &str| {
        let r = call(c, admin, "GET", p, None);
        assert_eq!(r.status, 200, "{p}: {}", r.body);
        r.json()
    };
    let mut audit = get("/api/v1/audit?limit=1000");
    let rows = audit["data"].as_array_mut().unwrap();
    rows.retain(|r| !r["route"].as_str().unwrap().starts_with("/api/v1/backup"));
    json!({"keys": get("/api/v1/keys"), "users": get("/api/v1/users"),
        "tenants": get("/api/v1/tenants"), "settings": get("/api/v1/settings"), "audit": audit})
}

fn round_trip(db: &Db) {
    let server = db.serve_env(&[], &[("WEFT_ADMIN_KEY", ENV_ADMIN)]);
    let c = server.client();
    let user = populate(&c, ENV_ADMIN);
    let before = state(&c, ENV_ADMIN);
    let b1 = backup(&c, ENV_ADMIN);
    let names: Vec<String> = zips::entries(&b1).into_keys().collect();
    for n in [
        "manifest.json",
        "settings.json",
        "tables/api_keys.jsonl",
        "tables/audit.jsonl",
        "tables/model_aliases.jsonl",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
    }
    // Changes after the backup: a key, a setting, a user gone.
    let (_, later) = api_key(&c, ENV_ADMIN, json!({"name": "later", "role": "user"}));
    call(
        &c,
        ENV_ADMIN,
        "PATCH",
        "/api/v1/settings",
        Some(r#"{"temperature": 1.5}"#),
    );
    let uid = before["users"]["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = call(
        &c,
        ENV_ADMIN,
        "DELETE",
        &format!("/api/v1/users/{uid}"),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);

    let r = restore_multipart(&c, ENV_ADMIN, &b1, "file");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["tables"]["tenants"], 1, "{}", r.body);
    let b2 = backup(&c, ENV_ADMIN);
    let (t1, t2) = (tables(&b1), tables(&b2));
    for t in ["tenants", "api_keys", "users", "settings"] {
        assert_eq!(t1[t], t2[t], "table {t} differs after the restore");
    }
    // The audit log is the backup's, then the restore's own row.
    let (a1, a2) = (t1["audit"].clone(), t2["audit"].clone());
    assert_eq!(a2[..a1.len()], a1[..]);
    assert!(
        a2[a1.len()..]
            .iter()
            .any(|r| r["route"] == "/api/v1/backup/restore" && r["status"] == 200),
        "{a2:?}"
    );
    // (Before any key is used again: a use records last_used_at.)
    let after = state(&c, ENV_ADMIN);
    assert_eq!(after["users"], before["users"]);
    assert_eq!(after["tenants"], before["tenants"]);
    assert_eq!(after["keys"], before["keys"]);
    // Keys authenticate again, the later one no more; live settings are the backup's.
    assert_eq!(call(&c, &user, "GET", "/v1/models", None).status, 200);
    assert_eq!(call(&c, &later, "GET", "/v1/models", None).status, 401);
    let s = call(&c, ENV_ADMIN, "GET", "/api/v1/settings", None).json();
    assert_eq!(s["temperature"].as_f64(), Some(0.3), "{s}");

    // A wipe (a fresh database) and the raw-body form: the same tables again.
    if db.is_sqlite() {
        drop(server);
        for f in ["weft.db", "weft.db-wal", "weft.db-shm"] {
            let _ = std::fs::remove_file(db.home.join(f));
        }
        let server = db.serve_env(&[], &[("WEFT_ADMIN_KEY", ENV_ADMIN)]);
        let c = server.client();
        assert_eq!(call(&c, &user, "GET", "/v1/models", None).status, 401);
        let r = restore(&c, ENV_ADMIN, &b1);
        assert_eq!(r.status, 200, "{}", r.body);
        let t3 = tables(&backup(&c, ENV_ADMIN));
        for t in ["tenants", "api_keys", "users", "settings"] {
            assert_eq!(
                t1[t], t3[t],
                "table {t} differs after restoring into a fresh database"
            );
        }
        assert_eq!(call(&c, &user, "GET", "/v1/models", None).status, 200);
    }
}

fn malicious(db: &Db) {
    let server = db.serve_env(&[], &[("WEFT_ADMIN_KEY", ENV_ADMIN)]);
    let c = server.client();
    populate(&c, ENV_ADMIN);
    let good = backup(&c, ENV_ADMIN);
    let before = state(&c, ENV_ADMIN);

    let m = zips::manifest(1, &[]);
    let rows = br#"{"id":"t_x","name":"evil","models":null,"token_quota":null,"created_at":1}
"#;
    // Altered rows under the original manifest.
    let mut altered = zips::entries(&good);
    altered.insert("tables/tenants.jsonl".into(), rows.to_vec());
    let altered: Vec<(String, Vec<u8>)> = altered.into_iter().collect();
    let altered_refs: Vec<(&str, &[u8])> = altered
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let many: Vec<(String, Vec<u8>)> = (0..100)
        .map(|i| (format!("tables/t{i}.jsonl"), vec![]))
        .collect();
    let many_refs: Vec<(&str, &[u8])> = many
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("not a zip", b"this is not a zip archive".to_vec(), 400, "not a valid ZIP"),
        ("no manifest", zip_of(&[("tables/tenants.jsonl", rows)]), 400, "no manifest.json"),
        ("zip-slip", zip_of(&[("../../weft-slip.txt", b"x"), ("manifest.json", &m)]), 400, "parent folder"),
        ("absolute", zip_of(&[("/tmp/weft-abs.txt", b"x"), ("manifest.json", &m)]), 400, "absolute path"),
        ("backslash", zip_of(&[("tables\\..\\x", b"x"), ("manifest.json", &m)]), 400, "backslash"),
        ("symlink", zips::with_symlink("tables/tenants.jsonl", "/etc/passwd"), 400, "symbolic link"),
        ("unexpected", signed(1, &[("notes.txt", b"hi")]), 400, "unexpected entry"),
        ("bad checksum", zip_of(&altered_refs), 400, "SHA-256"),
        ("too many entries", zip_of(&many_refs), 413, "entries"),
        ("bomb", zips::bomb(), 413, "zip bomb"),
        ("unknown format", signed(99, &[("tables/tenants.jsonl", rows)]), 422, "format 99"),
        ("wrong types", signed(1, &[("tables/tenants.jsonl", br#"{"id":1,"name":"x","created_at":"soon"}"#)]), 422, "tenants"),
        ("not json rows", signed(1, &[("tables/users.jsonl", b"{not json")]), 422, "line 1"),
        ("broken reference", signed(1, &[("tables/api_keys.jsonl", br#"{"id":"k","name":"k","role":"admin","hash":"h","prefix":"p","tenant":"nope","rate_limit_rpm":null,"created_at":1,"expires_at":null,"revoked_at":null,"last_used_at":null}"#)]), 422, "conflict"),
    ];
    for (what, zip, status, needle) in &cases {
        let r = restore(&c, ENV_ADMIN, zip);
        assert_eq!(r.status, *status, "{what}: {}", r.body);
        let msg = r.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(msg.contains(needle), "{what}: {msg:?} lacks {needle:?}");
        assert_eq!(state(&c, ENV_ADMIN), before, "{what} changed the state");
    }
    assert!(!db.home.join("../weft-slip.txt").exists());
    // No `file` field; a body of another type; an upload over the limit.
    let r = restore_multipart(&c, ENV_ADMIN, &good, "other");
    assert_eq!(r.status, 400, "{}", r.body);
    let (r, _) = zips::raw(
        &c,
        ENV_ADMIN,
        "POST",
        "/api/v1/backup/restore",
        Some((b"{}", "application/json")),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let huge = vec![0u8; 65 << 20];
    let r = restore(&c, ENV_ADMIN, &huge);
    assert_eq!(r.status, 413, "{}", r.body);
    // A user key may not restore (a denial: counted, not audited); each refusal of an
    // admin's restore was audited; the server still serves.
    let (_, user) = api_key(&c, ENV_ADMIN, json!({"name": "not-admin", "role": "user"}));
    assert_eq!(restore(&c, &user, &good).status, 403);
    let audit = call(&c, ENV_ADMIN, "GET", "/api/v1/audit?limit=1000", None).json();
    let refused = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["route"] == "/api/v1/backup/restore" && r["status"] != 200)
        .count();
    assert!(refused >= cases.len() + 3, "{refused} refusals audited");
    assert_eq!(call(&c, ENV_ADMIN, "GET", "/health", None).status, 200);
    assert_eq!(call(&c, ENV_ADMIN, "GET", "/v1/models", None).status, 200);
}

/// A SQLite backup restores into a fresh Postgres, and that one's backup into a fresh SQLite.
#[test]
fn cross_backend_restore() {
    let Some(lite) = Db::new(Backend::Sqlite, "cross") else {
        return;
    };
    let Some(pg) = Db::new(Backend::Postgres, "cross") else {
        return;
    };
    let a = lite.serve_env(&[], &[("WEFT_ADMIN_KEY", ENV_ADMIN)]);
    let user = populate(&a.client(), ENV_ADMIN);
    let from_lite = backup(&a.client(), ENV_ADMIN);
    drop(a);
    let p = pg.serve_env(&[], &[("WEFT_ADMIN_KEY", ENV_ADMIN)]);
    let r = restore(&p.client(), ENV_ADMIN, &from_lite);
    assert_eq!(r.status, 200, "{}", r.body);
    let from_pg = backup(&p.client(), ENV_ADMIN);
    assert_eq!(
        call(&p.client(), &user, "GET", "/v1/models", None).status,
        200
    );
    let (t1, t2) = (tables(&from_lite), tables(&from_pg));
    for t in ["tenants", "api_keys", "users", "settings"] {
        assert_eq!(t1[t], t2[t], "table {t} differs after SQLite → Postgres");
    }
    drop(p);
    let Some(lite2) = Db::new(Backend::Sqlite, "cross-back") else {
        return;
    };
    let b = lite2.serve_env(&[], &[("WEFT_ADMIN_KEY", ENV_ADMIN)]);
    let r = restore(&b.client(), ENV_ADMIN, &from_pg);
    assert_eq!(r.status, 200, "{}", r.body);
    let t3 = tables(&backup(&b.client(), ENV_ADMIN));
    for t in ["tenants", "api_keys", "users", "settings"] {
        assert_eq!(t1[t], t3[t], "table {t} differs after Postgres → SQLite");
    }
    assert_eq!(
        call(&b.client(), &user, "GET", "/v1/models", None).status,
        200
    );
}
