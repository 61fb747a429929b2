//! The logical dump on SQLite: every table is listed, a dump loads back into a fresh
//! database unchanged, and a dump that does not fit the schema changes nothing.

use std::collections::BTreeMap;

use serde_json::json;
use weft_storage::{NewAudit, NewTenant, Row, Storage, StorageError, NOT_BACKED_UP, TABLES};

async fn fresh(tag: &str) -> (Storage, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("weft-dump-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = Storage::open(&dir.join("weft.db").display().to_string())
        .await
        .unwrap();
    (s, dir)
}

async fn dump(s: &Storage) -> BTreeMap<String, Vec<Row>> {
    let d = s.dump().await.unwrap();
    assert_eq!(d.len(), TABLES.len());
    d.into_iter().map(|(t, r)| (t.to_string(), r)).collect()
}

/// A table added by a migration but missing from TABLES would be silently left out of
/// backups: this fails instead.
#[tokio::test]
async fn every_table_is_dumped() {
    let (s, dir) = fresh("tables").await;
    let path = dir.join("weft.db");
    s.close().await;
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'weft_migrations'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for n in &names {
        assert!(
            TABLES.contains(&n.as_str()) || NOT_BACKED_UP.contains(&n.as_str()),
            "table {n} is not in weft_storage::TABLES (storage/src/dump.rs): backups would miss it"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn dump_loads_back_and_bad_dumps_change_nothing() {
    let (a, dir_a) = fresh("a").await;
    a.create_tenant(NewTenant {
        name: "acme".into(),
        models: Some(vec!["smol".into()]),
        token_quota: Some(1000),
    })
    .await
    .unwrap();
    a.write_settings(&[("temperature".into(), Some(json!(0.5)))], false)
        .await
        .unwrap();
    a.append_audit(NewAudit {
        actor: "open".into(),
        method: "POST".into(),
        route: "/api/v1/tenants".into(),
        status: 201,
        remote: None,
        details: Some(json!({"name": "acme"})),
    })
    .await
    .unwrap();
    let d = dump(&a).await;
    assert_eq!(d["tenants"].len(), 1);

    let (b, dir_b) = fresh("b").await;
    b.load_dump(&d).await.unwrap();
    assert_eq!(dump(&b).await, d);
    // The audit log continues after the loaded ids.
    b.append_audit(NewAudit {
        actor: "open".into(),
        method: "PATCH".into(),
        route: "/api/v1/settings".into(),
        status: 200,
        remote: None,
        details: None,
    })
    .await
    .unwrap();
    assert_eq!(b.recent_audit(10).await.unwrap().len(), 2);
    let before = dump(&b).await;

    // A wrong type, an unknown column, an unknown table, a broken reference: all refused,
    // nothing changed.
    let mut wrong = d.clone();
    wrong.get_mut("tenants").unwrap()[0].insert("created_at".into(), json!("soon"));
    let mut column = d.clone();
    column.get_mut("tenants").unwrap()[0].insert("colour".into(), json!("red"));
    let mut table = d.clone();
    table.insert("secrets".into(), vec![]);
    let mut orphan = d.clone();
    orphan.insert(
        "users".into(),
        vec![
            serde_json::from_value(json!({"id": "u1", "name": "x", "password_hash": "h",
            "role": "user", "tenant": "missing", "created_at": 1, "updated_at": 1}))
            .unwrap(),
        ],
    );
    for bad in [wrong, column, table, orphan] {
        let e = b.load_dump(&bad).await.unwrap_err();
        assert!(matches!(e, StorageError::Invalid(_)), "{e:?}");
        assert_eq!(dump(&b).await, before);
    }
    // A dump without a table empties it.
    let mut partial = d.clone();
    partial.remove("audit");
    b.load_dump(&partial).await.unwrap();
    assert!(dump(&b).await["audit"].is_empty());
    let _ = std::fs::remove_dir_all(&dir_a);
    let _ = std::fs::remove_dir_all(&dir_b);
}

/// The streamed dump announces every table in order and sends the same rows as the whole one,
/// and stops quietly when its reader goes away.
#[tokio::test]
async fn streamed_dump_matches_the_whole_one() {
    let (s, dir) = fresh("streamed").await;
    for name in ["a", "b", "c"] {
        s.create_tenant(NewTenant {
            name: name.into(),
            models: None,
            token_quota: None,
        })
        .await
        .unwrap();
    }
    let whole = dump(&s).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(2);
    let reader = tokio::spawn(async move {
        let mut got: BTreeMap<String, Vec<Row>> = BTreeMap::new();
        let mut order = Vec::new();
        let mut current = None;
        while let Some(item) = rx.recv().await {
            match item {
                weft_storage::DumpItem::Table(t) => {
                    order.push(t);
                    got.insert(t.to_string(), Vec::new());
                    current = Some(t.to_string());
                }
                weft_storage::DumpItem::Row(r) => {
                    got.get_mut(current.as_ref().unwrap()).unwrap().push(r);
                }
            }
        }
        (order, got)
    });
    s.dump_to(&tx).await.unwrap();
    drop(tx);
    let (order, got) = reader.await.unwrap();
    assert_eq!(order, TABLES);
    assert_eq!(got, whole);
    assert_eq!(got["tenants"].len(), 3);
    // A reader that is gone ends the dump without an error.
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    drop(rx);
    s.dump_to(&tx).await.unwrap();
    s.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
