//! The storage interface on a fresh SQLite file: migrations, keys, users, tenants, settings,
//! audit, and the errors callers map to 404 and 409. (The server suite in tests/ runs the same
//! operations on Postgres too.)

use serde_json::json;
use weft_storage::{NewAudit, NewKey, NewTenant, NewUser, Storage, StorageError, UserPatch};

fn key(name: &str, hash: &str) -> NewKey {
    NewKey {
        name: name.into(),
        role: "user".into(),
        hash: hash.into(),
        prefix: "weft_abc".into(),
        tenant: None,
        rate_limit_rpm: None,
        tokens_per_minute: None,
        expires_at: None,
    }
}

#[tokio::test]
async fn round_trips_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("weft-storage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("sub/weft.db");
    let s = Storage::open(&path.display().to_string()).await.unwrap();
    assert_eq!(s.backend(), "sqlite");
    assert_eq!(s.key_count().await.unwrap(), 0);

    let t = s
        .create_tenant(NewTenant {
            name: "acme".into(),
            models: Some(vec!["smol".into()]),
            token_quota: Some(1000),
        })
        .await
        .unwrap();
    assert_eq!(s.get_tenant(&t.id).await.unwrap().models, t.models);
    assert!(matches!(
        s.get_tenant("tenant_nope").await,
        Err(StorageError::NotFound(_))
    ));

    let k = s.create_key(key("a", "h1")).await.unwrap();
    assert!(matches!(
        s.create_key(key("a", "h2")).await,
        Err(StorageError::Conflict(_))
    ));
    let mut with_tenant = key("b", "h3");
    with_tenant.tenant = Some("tenant_nope".into());
    assert!(matches!(
        s.create_key(with_tenant).await,
        Err(StorageError::Conflict(_))
    ));
    assert_eq!(s.key_by_hash("h1").await.unwrap().unwrap().id, k.id);
    assert!(s.key_by_hash("nope").await.unwrap().is_none());
    assert!(s.revoke_key(&k.id).await.unwrap().revoked_at.is_some());
    assert!(matches!(
        s.revoke_key("key_nope").await,
        Err(StorageError::NotFound(_))
    ));
    assert_eq!(
        (
            s.key_count().await.unwrap(),
            s.active_key_count().await.unwrap()
        ),
        (1, 0)
    );

    let u = s
        .create_user(NewUser {
            name: "ann".into(),
            role: "user".into(),
            password_hash: "$argon2id$stub".into(),
            tenant: Some(t.id.clone()),
        })
        .await
        .unwrap();
    let patch = UserPatch {
        role: Some("admin".into()),
        tenant: Some(None),
        ..Default::default()
    };
    let u2 = s.update_user(&u.id, patch).await.unwrap();
    assert_eq!((u2.role.as_str(), u2.tenant), ("admin", None));
    assert_eq!(
        s.user_password_hash("ann").await.unwrap().as_deref(),
        Some("$argon2id$stub")
    );
    s.delete_user(&u.id).await.unwrap();
    assert!(matches!(
        s.delete_user(&u.id).await,
        Err(StorageError::NotFound(_))
    ));

    s.write_settings(&[("temperature".into(), Some(json!(0.5)))], false)
        .await
        .unwrap();
    s.write_settings(&[("seed".into(), Some(json!(1)))], false)
        .await
        .unwrap();
    assert_eq!(s.settings().await.unwrap().len(), 2);
    s.write_settings(&[("seed".into(), Some(json!(2)))], true)
        .await
        .unwrap();
    let all = s.settings().await.unwrap();
    assert_eq!((all.len(), &all["seed"]), (1, &json!(2)));

    s.append_audit(NewAudit {
        actor: k.id.clone(),
        method: "POST".into(),
        route: "/api/v1/keys".into(),
        status: 201,
        remote: Some("127.0.0.1".into()),
        details: Some(json!({"name": "a"})),
    })
    .await
    .unwrap();
    let rows = s.recent_audit(10).await.unwrap();
    assert_eq!((rows.len(), rows[0].status), (1, 201));
    s.close().await;

    // Reopening applies no migration twice and keeps the data.
    let s = Storage::open(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    assert_eq!(s.key_count().await.unwrap(), 1);
    s.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn chat_sessions_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("weft-storage-sessions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("weft.db").display().to_string();
    let s = Storage::open(&path).await.unwrap();
    assert_eq!(s.session_messages("s1", "ka").await.unwrap(), None);
    assert!(s.create_session("s1", "ka").await.unwrap());
    assert!(
        !s.create_session("s1", "ka").await.unwrap(),
        "the id exists already"
    );
    assert_eq!(s.session_messages("s1", "ka").await.unwrap(), Some(vec![]));
    let turn = vec![
        json!({"role": "user", "content": "hi"}),
        json!({"role": "assistant", "content": "hello"}),
    ];
    assert!(s.write_session("s1", "ka", &turn, false).await.unwrap());
    // Without `create`, a missing session is not made.
    assert!(!s.write_session("s2", "ka", &turn, false).await.unwrap());
    assert_eq!(s.session_messages("s2", "ka").await.unwrap(), None);
    // A shorter conversation replaces the longer one (an edited, resent turn).
    assert!(s.write_session("s2", "ka", &turn, true).await.unwrap());
    assert!(s
        .write_session("s2", "ka", &turn[..1], false)
        .await
        .unwrap());
    // Another owner neither sees, writes, takes over nor deletes them.
    assert_eq!(s.session_messages("s1", "kb").await.unwrap(), None);
    assert!(!s
        .write_session("s1", "kb", &turn[..1], false)
        .await
        .unwrap());
    assert!(!s.write_session("s1", "kb", &turn[..1], true).await.unwrap());
    assert!(!s.create_session("s1", "kb").await.unwrap());
    assert!(!s.delete_session("s1", "kb").await.unwrap());
    assert_eq!(
        s.session_messages("s1", "ka").await.unwrap(),
        Some(turn.clone())
    );
    s.close().await;

    // Reopened: both sessions are there as written.
    let s = Storage::open(&path).await.unwrap();
    assert_eq!(
        s.session_messages("s1", "ka").await.unwrap(),
        Some(turn.clone())
    );
    assert_eq!(
        s.session_messages("s2", "ka").await.unwrap(),
        Some(turn[..1].to_vec())
    );
    assert!(s.delete_session("s1", "ka").await.unwrap());
    assert!(!s.delete_session("s1", "ka").await.unwrap());
    assert_eq!(s.session_messages("s1", "ka").await.unwrap(), None);
    s.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn ab_tests_tenant_usage_and_adapters_on_sqlite() {
    use weft_storage::{NewAbTest, NewAbVote, NewAdapter, TenantPatch, Variant};
    let dir = std::env::temp_dir().join(format!("weft-storage-ab-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = Storage::open(&dir.join("weft.db").display().to_string())
        .await
        .unwrap();

    let t = s
        .create_ab_test(NewAbTest {
            name: "x".into(),
            model_a: "a".into(),
            model_b: "b".into(),
            share_b: 3000,
        })
        .await
        .unwrap();
    let mut b = 0;
    for _ in 0..200 {
        if s.route_ab(&t.id).await.unwrap().1 == Variant::B {
            b += 1;
        }
    }
    assert_eq!(b, 60);
    let got = s.get_ab_test(&t.id).await.unwrap();
    assert_eq!((got.routed, got.routed_b()), (200, 60));
    for v in [Variant::A, Variant::B, Variant::B] {
        s.add_ab_vote(NewAbVote {
            test_id: t.id.clone(),
            variant: v,
            request_id: None,
            comment: None,
            actor: "k".into(),
        })
        .await
        .unwrap();
    }
    assert_eq!(s.ab_tally(&t.id).await.unwrap(), (1, 2));
    s.delete_ab_test(&t.id).await.unwrap();
    assert!(matches!(
        s.route_ab(&t.id).await,
        Err(StorageError::NotFound(_))
    ));
    assert_eq!(s.ab_tally(&t.id).await.unwrap(), (0, 0));

    let ten = s
        .create_tenant(NewTenant {
            name: "q".into(),
            models: None,
            token_quota: Some(10),
        })
        .await
        .unwrap();
    s.add_tenant_tokens(&ten.id, 7).await.unwrap();
    s.add_tenant_tokens(&ten.id, 5).await.unwrap();
    assert_eq!(s.get_tenant(&ten.id).await.unwrap().tokens_used, 12);
    let p = s
        .patch_tenant(
            &ten.id,
            TenantPatch {
                token_quota: Some(None),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!((p.token_quota, p.tokens_used), (None, 12));
    let p = s
        .patch_tenant(
            &ten.id,
            TenantPatch {
                reset_usage: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(p.tokens_used, 0);

    let a = s
        .create_adapter(NewAdapter {
            name: "l".into(),
            base_model: "smol".into(),
            path: "/m/l.gguf".into(),
            scale: 0.5,
        })
        .await
        .unwrap();
    assert_eq!(s.find_adapter("l").await.unwrap().unwrap().id, a.id);
    assert_eq!(s.find_adapter(&a.id).await.unwrap().unwrap().scale, 0.5);
    s.delete_adapter(&a.id).await.unwrap();
    assert!(s.find_adapter("l").await.unwrap().is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn model_aliases_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("weft-storage-aliases-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = Storage::open(&dir.join("weft.db").display().to_string())
        .await
        .unwrap();
    let alias = |name: &str, target: &str| weft_storage::ModelAlias {
        name: name.into(),
        target_kind: "alias".into(),
        target: target.into(),
        overrides: "{}".into(),
        origin: "created".into(),
        updated_at: 0,
    };
    s.write_model_aliases(&[alias("a", "smol"), alias("b", "smol")], &[])
        .await
        .unwrap();
    // A write replaces a row of the same name and removes those named.
    s.write_model_aliases(&[alias("a", "other")], &["b".to_string()])
        .await
        .unwrap();
    let rows = s.model_aliases().await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].name.as_str(), rows[0].target.as_str()),
        ("a", "other")
    );
    assert!(rows[0].updated_at > 0);
    // An import adds only names not stored yet.
    let added = s
        .import_model_aliases(&[alias("a", "imported"), alias("c", "smol")])
        .await
        .unwrap();
    assert_eq!(added, 1);
    let rows = s.model_aliases().await.unwrap();
    let targets: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.name.as_str(), r.target.as_str()))
        .collect();
    assert_eq!(targets, [("a", "other"), ("c", "smol")]);
    // A bad kind is refused by the schema.
    let mut bad = alias("d", "smol");
    bad.target_kind = "nonsense".into();
    assert!(s.write_model_aliases(&[bad], &[]).await.is_err());
    s.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
