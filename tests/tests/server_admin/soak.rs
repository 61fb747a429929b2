//! Two replicas on one Postgres, 8 clients for 60 s with several keys: small chat
//! completions, model lists and now and then an admin change, spread over both replicas.
//! The only errors allowed are the deliberate 429s of the keys with a low rate limit (with
//! Retry-After), and every admin change made has its audit row.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{api_key, call, Backend, Db};

const ADMIN: &str = "weft_env-admin-key-for-the-soak-test-000000001";
const CLIENTS: usize = 8;
const RUN: Duration = Duration::from_secs(60);

#[test]
fn two_replicas_eight_clients_for_a_minute() {
    let Some(db) = Db::new(Backend::Postgres, "soak") else {
        return;
    };
    let a = db.serve_env(&["--queue", "256"], &[("WEFT_ADMIN_KEY", ADMIN)]);
    let b = db.serve_env(&["--queue", "256"], &[("WEFT_ADMIN_KEY", ADMIN)]);
    let replicas = [a.client(), b.client()];
    // Unlimited keys, and keys limited to 20 requests a minute (they run out: 429s).
    let mut keys = Vec::new();
    for i in 0..4 {
        let limited = i % 2 == 1;
        let mut body = json!({"name": format!("soak-{i}"), "role": "user"});
        if limited {
            body["rate_limit_rpm"] = json!(20);
        }
        keys.push((api_key(&replicas[i % 2], ADMIN, body).1, limited));
    }
    let statuses = Arc::new(Mutex::new(BTreeMap::<String, usize>::new()));
    let mutations = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let t0 = Instant::now();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let (keys, statuses, mutations) = (keys.clone(), statuses.clone(), mutations.clone());
            std::thread::spawn(move || {
                let mut i = 0usize;
                while t0.elapsed() < RUN {
                    i += 1;
                    let c = &replicas[(n + i) % 2];
                    let (key, limited) = &keys[(n + i) % keys.len()];
                    let (what, r) = if i.is_multiple_of(25) && n < 2 {
                        // An admin change, audited.
                        let (method, path, body) = if n == 0 {
                            (
                                "PATCH",
                                "/api/v1/settings".to_string(),
                                json!({"temperature": (i % 10) as f64 / 10.0}),
                            )
                        } else {
                            (
                                "POST",
                                "/api/v1/keys".to_string(),
                                json!({"name": format!("soak-new-{i}"), "role": "readonly"}),
                            )
                        };
                        let r = call(c, ADMIN, method, &path, Some(&body.to_string()));
                        if r.status < 300 {
                            mutations.lock().unwrap().push((method.to_string(), path));
                        }
                        ("admin", r)
                    } else if i.is_multiple_of(3) {
                        let body = json!({"model": "smol", "max_tokens": 4,
                            "messages": [{"role": "user", "content": format!("Say hi {i}")}]});
                        (
                            "chat",
                            call(
                                c,
                                key,
                                "POST",
                                "/v1/chat/completions",
                                Some(&body.to_string()),
                            ),
                        )
                    } else {
                        ("models", call(c, key, "GET", "/v1/models", None))
                    };
                    let ok = r.status == 200 || r.status == 201;
                    let deliberate = r.status == 429
                        && *limited
                        && what != "admin"
                        && r.header("retry-after")
                            .is_some_and(|s| s.parse::<u64>().is_ok());
                    assert!(
                        ok || deliberate,
                        "client {n} request {i} ({what}): {} {}",
                        r.status,
                        r.body
                    );
                    *statuses
                        .lock()
                        .unwrap()
                        .entry(format!("{what} {}", r.status))
                        .or_default() += 1;
                    if r.status == 429 {
                        // Back off a little, as a client honouring Retry-After would.
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a client failed");
    }
    let statuses = statuses.lock().unwrap().clone();
    eprintln!("soak: {statuses:?}");
    let get = |k: &str| statuses.get(k).copied().unwrap_or(0);
    assert!(get("chat 200") > 0 && get("models 200") > 0, "{statuses:?}");
    assert!(
        get("models 429") + get("chat 429") > 0,
        "no deliberate 429: {statuses:?}"
    );

    // Every admin change made has its audit row (both replicas write to the one log).
    let mutations = mutations.lock().unwrap().clone();
    assert!(!mutations.is_empty());
    let audit = call(&replicas[0], ADMIN, "GET", "/api/v1/audit?limit=1000", None).json();
    let rows = audit["data"].as_array().unwrap();
    for (method, route) in
        ["PATCH /api/v1/settings", "POST /api/v1/keys"].map(|s| s.split_once(' ').unwrap())
    {
        let made = mutations
            .iter()
            .filter(|(m, r)| m == method && r == route)
            .count();
        let audited = rows
            .iter()
            .filter(|r| {
                r["method"] == method
                    && r["route"] == route
                    && r["actor"] == "env"
                    && r["status"].as_i64().unwrap() < 300
            })
            .count();
        // The keys made before the clients started are audited too.
        let setup = if method == "POST" { keys.len() } else { 0 };
        assert_eq!(
            audited,
            made + setup,
            "{method} {route}: {made} made, {audited} audited"
        );
    }
}
