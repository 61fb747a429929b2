//! Per-key limits shared through the database (issue 33): two `weft serve` replicas on one
//! Postgres give a key its requests per minute and its tokens per minute once between them,
//! whichever replica each request reaches; and the storage's bucket arithmetic, at given
//! times, on SQLite and Postgres.
//!
//! No assertion depends on how fast the machine is: the limits used refill one request in
//! 30 s and the token debt lasts minutes, far longer than the few requests take.

use serde_json::json;
use weft_storage::Storage;
use weft_tests::postgres::Postgres;
use weft_tests::{Client, Response};

use crate::harness::{api_key, call, Backend, Db};

fn on_two(tag: &str) -> Option<(Db, [weft_tests::Server; 2], String)> {
    let db = Db::new(Backend::Postgres, tag)?;
    let admin = format!("weft_shared-bootstrap-key-of-both-replicas-{tag}");
    let a = db.serve_env(&[], &[("WEFT_ADMIN_KEY", admin.as_str())]);
    let b = db.serve_env(&[], &[("WEFT_ADMIN_KEY", admin.as_str())]);
    Some((db, [a, b], admin))
}

fn retry_after(r: &Response) -> u64 {
    r.header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a Retry-After header in seconds: {}", r.body))
}

#[test]
fn requests_per_minute_are_shared_by_replicas() {
    let Some((_db, servers, admin)) = on_two("shared-rpm") else {
        return;
    };
    let [ca, cb]: [Client; 2] = [servers[0].client(), servers[1].client()];
    let (_, key) = api_key(
        &ca,
        &admin,
        json!({"name": "two-a-minute", "role": "user", "rate_limit_rpm": 2}),
    );
    // One request on each replica uses up the two; each replica then refuses the third.
    assert_eq!(call(&ca, &key, "GET", "/v1/models", None).status, 200);
    assert_eq!(call(&cb, &key, "GET", "/v1/models", None).status, 200);
    for c in [&ca, &cb] {
        let r = call(c, &key, "GET", "/v1/models", None);
        assert_eq!(r.status, 429, "{}", r.body);
        assert_eq!(
            r.json()["error"]["code"],
            "rate_limit_exceeded",
            "{}",
            r.body
        );
        assert!(r.body.contains("2 requests per minute"), "{}", r.body);
        // A request is 30 s of refill: the wait is at most that.
        let wait = retry_after(&r);
        assert!((1..=30).contains(&wait), "{wait}");
    }
    // Another key has its own bucket, on both.
    assert_eq!(call(&cb, &admin, "GET", "/v1/models", None).status, 200);
}

#[test]
fn tokens_per_minute_are_shared_by_replicas() {
    let Some((_db, servers, admin)) = on_two("shared-tpm") else {
        return;
    };
    let [ca, cb]: [Client; 2] = [servers[0].client(), servers[1].client()];
    let (_, key) = api_key(
        &ca,
        &admin,
        json!({"name": "five-tokens", "role": "user", "tokens_per_minute": 5}),
    );
    let gen = |c: &Client| {
        let body = json!({"model": "smol", "max_tokens": 1,
            "prompt": "Count with me: one two three four five six seven eight nine ten"});
        call(c, &key, "POST", "/v1/completions", Some(&body.to_string()))
    };
    // A fresh bucket lets the first request in; its prompt alone is twice the minute's five
    // tokens or more, so the bucket ends a minute or more in debt (counted before the
    // response ended).
    let r = gen(&ca);
    assert_eq!(r.status, 200, "{}", r.body);
    let used = r.json()["usage"]["total_tokens"].as_u64().unwrap();
    assert!(used >= 10, "{}", r.body);
    // The debt is `used` minutes' worth at 5 a minute, less the minute the bucket held.
    let most = (used * 12).saturating_sub(60) + 1;
    for c in [&cb, &ca] {
        let r = gen(c);
        assert_eq!(r.status, 429, "{}", r.body);
        assert!(r.body.contains("tokens per minute"), "{}", r.body);
        let wait = retry_after(&r);
        assert!((1..=most).contains(&wait), "{wait} (at most {most})");
    }
    // The Ollama surface on the other replica refuses too, in its shape.
    let body =
        json!({"model": "smol", "stream": false, "prompt": "Hi", "options": {"num_predict": 1}});
    let r = call(&cb, &key, "POST", "/api/generate", Some(&body.to_string()));
    assert_eq!(r.status, 429, "{}", r.body);
    assert!(r.header("retry-after").is_some());
}

/// The bucket arithmetic of `weft_storage::rate_limits` at given times (microseconds).
async fn arithmetic(s: &Storage) {
    const S: i64 = 1_000_000;
    let t0 = 1_800_000_000 * S;
    let at = |us: i64| Some(t0 + us);
    // Two requests a minute: each is 30 s of refill.
    assert_eq!(s.take_request("k", 2, at(0)).await.unwrap(), Ok(()));
    assert_eq!(s.take_request("k", 2, at(0)).await.unwrap(), Ok(()));
    assert_eq!(s.take_request("k", 2, at(0)).await.unwrap(), Err(30));
    // A refused request takes nothing: half a second short, then exactly enough.
    assert_eq!(
        s.take_request("k", 2, at(29 * S + S / 2)).await.unwrap(),
        Err(1)
    );
    assert_eq!(s.take_request("k", 2, at(30 * S)).await.unwrap(), Ok(()));
    assert_eq!(s.take_request("k", 2, at(30 * S)).await.unwrap(), Err(30));
    // An idle bucket refills to full, not beyond: two again after ten minutes, not twenty.
    let later = 600 * S;
    assert_eq!(s.take_request("k", 2, at(later)).await.unwrap(), Ok(()));
    assert_eq!(s.take_request("k", 2, at(later)).await.unwrap(), Ok(()));
    assert_eq!(s.take_request("k", 2, at(later)).await.unwrap(), Err(30));
    // Another key, and the same key's tokens, are separate buckets.
    assert_eq!(s.take_request("other", 2, at(0)).await.unwrap(), Ok(()));
    assert_eq!(s.check_tokens("k", at(0)).await.unwrap(), Ok(()));

    // 600 tokens a minute: 650 used are 65 s of refill, 5 s of debt beyond the minute.
    s.spend_tokens("t", 600, 650, at(0)).await.unwrap();
    assert_eq!(s.check_tokens("t", at(0)).await.unwrap(), Err(6));
    assert_eq!(s.check_tokens("t", at(5 * S)).await.unwrap(), Err(1));
    assert_eq!(s.check_tokens("t", at(5 * S + 1)).await.unwrap(), Ok(()));
    // Spending adds to what is still owed: 600 more at 5 s leave 60 + 60 s.
    s.spend_tokens("t", 600, 600, at(5 * S)).await.unwrap();
    assert_eq!(s.check_tokens("t", at(5 * S)).await.unwrap(), Err(61));
    // Absurd use is capped at 100 days of debt instead of overflowing.
    for _ in 0..3 {
        s.spend_tokens("huge", 1, u64::MAX, at(0)).await.unwrap();
    }
    let days100 = 100 * 24 * 3600;
    assert_eq!(
        s.check_tokens("huge", at(0)).await.unwrap(),
        Err(days100 - 60 + 1)
    );

    // The database's clock (what servers use): one request a minute, then a wait of at
    // most a minute.
    assert_eq!(s.take_request("clock", 1, None).await.unwrap(), Ok(()));
    let wait = s.take_request("clock", 1, None).await.unwrap().unwrap_err();
    assert!((1..=60).contains(&wait), "{wait}");
    s.spend_tokens("clock", 1, 2, None).await.unwrap();
    let wait = s.check_tokens("clock", None).await.unwrap().unwrap_err();
    assert!((1..=61).contains(&wait), "{wait}");
}

fn block_on(f: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f);
}

#[test]
fn bucket_arithmetic_sqlite() {
    let dir = std::env::temp_dir().join(format!("weft-rate-limits-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    block_on(async {
        let s = Storage::open(&dir.join("weft.db").display().to_string())
            .await
            .unwrap();
        arithmetic(&s).await;
        s.close().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bucket_arithmetic_postgres() {
    let Some(pg) = Postgres::start("rate-limits") else {
        return;
    };
    block_on(async {
        let s = Storage::open(&pg.url()).await.unwrap();
        arithmetic(&s).await;
        s.close().await;
    });
}
