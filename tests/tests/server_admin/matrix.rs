//! The authorization matrix: every admin route × {no key, bad key, expired, revoked, user,
//! readonly, admin}, inference routes by role, error shapes per surface, the audit log.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{api_key, call, Db};
use crate::on_both;

on_both!(auth_matrix, auth_matrix_sqlite, auth_matrix_postgres);

/// A route of the admin plane and, for mutations, a body an admin may send.
struct Route {
    method: &'static str,
    path: &'static str,
    body: Option<String>,
}

fn admin_routes(n: usize) -> Vec<Route> {
    let r = |method, path, body: Option<serde_json::Value>| Route {
        method,
        path,
        body: body.map(|b| b.to_string()),
    };
    vec![
        r("GET", "/api/v1/keys", None),
        r(
            "POST",
            "/api/v1/keys",
            Some(json!({"name": format!("k{n}"), "role": "user"})),
        ),
        r("DELETE", "/api/v1/keys/key_missing", None),
        r("GET", "/api/v1/settings", None),
        r("PATCH", "/api/v1/settings", Some(json!({"top_k": 40}))),
        r("POST", "/api/v1/settings", Some(json!({"top_k": 40}))),
        r("GET", "/api/v1/users", None),
        r(
            "POST",
            "/api/v1/users",
            Some(json!({"name": format!("u{n}"), "password": "correct horse", "role": "user"})),
        ),
        r("GET", "/api/v1/users/user_missing", None),
        r(
            "PATCH",
            "/api/v1/users/user_missing",
            Some(json!({"role": "readonly"})),
        ),
        r("DELETE", "/api/v1/users/user_missing", None),
        r("GET", "/api/v1/tenants", None),
        r(
            "POST",
            "/api/v1/tenants",
            Some(json!({"name": format!("t{n}")})),
        ),
        r("GET", "/api/v1/tenants/tenant_missing", None),
        r(
            "PATCH",
            "/api/v1/tenants/tenant_missing",
            Some(json!({"reset_usage": true})),
        ),
        r("GET", "/api/v1/ab", None),
        r(
            "POST",
            "/api/v1/ab",
            Some(json!({"name": format!("ab{n}"), "model_a": "smol", "model_b": "smol"})),
        ),
        r("GET", "/api/v1/ab/ab_missing", None),
        r("DELETE", "/api/v1/ab/ab_missing", None),
        r("GET", "/api/v1/adapters", None),
        r("GET", "/api/v1/adapters/adapter_missing", None),
        r("DELETE", "/api/v1/adapters/adapter_missing", None),
        r("GET", "/api/v1/audit", None),
        r("GET", "/api/v1/backup", None),
        r("GET", "/api/v1/models/library", None),
        r("GET", "/api/v1/moderation/rules", None),
        r(
            "POST",
            "/api/v1/moderation/rules",
            Some(
                json!({"pattern": format!("w{n}"), "kind": "keyword", "action": "flag", "applies_to": "input"}),
            ),
        ),
        r("DELETE", "/api/v1/moderation/rules/rule_missing", None),
    ]
}

fn auth_matrix(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&[]);
    let c = server.client();
    let (_, user) = api_key(&c, &admin, json!({"name": "user", "role": "user"}));
    let (_, readonly) = api_key(&c, &admin, json!({"name": "ro", "role": "readonly"}));
    let (revoked_id, revoked) = api_key(&c, &admin, json!({"name": "gone", "role": "admin"}));
    let expires = weft_storage::now() + 2;
    let (_, expired) = api_key(
        &c,
        &admin,
        json!({"name": "old", "role": "admin", "expires_at": expires}),
    );
    let r = call(
        &c,
        &admin,
        "DELETE",
        &format!("/api/v1/keys/{revoked_id}"),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["revoked_at"].is_i64(), "{}", r.body);
    // Wait (not assert on time) until the short-lived key has expired.
    let t0 = Instant::now();
    while weft_storage::now() <= expires {
        assert!(t0.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(200));
    }
    let bad = "weft_this-key-was-never-issued-by-the-server-000";
    let denied: [(&str, &str, u16, &str); 6] = [
        ("none", "", 401, "missing"),
        ("bad", bad, 401, "invalid"),
        ("expired", &expired, 401, "expired"),
        ("revoked", &revoked, 401, "revoked"),
        ("user", &user, 403, "admin key"),
        ("readonly", &readonly, 403, "admin key"),
    ];
    for (i, route) in admin_routes(0).iter().enumerate() {
        for (who, key, status, words) in &denied {
            let r = call(&c, key, route.method, route.path, route.body.as_deref());
            assert_eq!(
                r.status, *status,
                "{who} {} {}: {}",
                route.method, route.path, r.body
            );
            let msg = r.json()["error"].as_str().unwrap_or("").to_string();
            assert!(msg.contains(words), "{who} {}: {msg}", route.path);
            if *status == 401 {
                assert_eq!(r.header("www-authenticate"), Some("Bearer"));
            }
        }
        // Names differ per route so creations do not collide.
        let route = &admin_routes(i)[i];
        let r = call(&c, &admin, route.method, route.path, route.body.as_deref());
        let ok = if route.path.ends_with("_missing") {
            404
        } else {
            200
        };
        let ok = if route.method == "POST" && !route.path.ends_with("settings") {
            201
        } else {
            ok
        };
        assert_eq!(
            r.status, ok,
            "admin {} {}: {}",
            route.method, route.path, r.body
        );
    }
    // Public routes need no key, and ignore a bad one.
    for path in ["/health", "/api/v1/about"] {
        assert_eq!(call(&c, bad, "GET", path, None).status, 200, "{path}");
    }
    assert_eq!(
        call(&c, "", "GET", "/api/v1/about", None).json()["auth"],
        "keys"
    );

    // Inference: OpenAI's error shape on /v1, reads for readonly, use for user.
    let r = call(&c, bad, "GET", "/v1/models", None);
    assert_eq!(r.status, 401);
    let e = &r.json()["error"];
    assert_eq!(
        (e["type"].as_str(), e["code"].as_str()),
        (Some("invalid_request_error"), Some("invalid_api_key")),
        "{}",
        r.body
    );
    for key in [&user, &readonly, &admin] {
        assert_eq!(call(&c, key, "GET", "/v1/models", None).status, 200);
    }
    let chat = json!({"model": "smol", "max_tokens": 4,
        "messages": [{"role": "user", "content": "Hi"}]})
    .to_string();
    let r = call(&c, &readonly, "POST", "/v1/chat/completions", Some(&chat));
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "insufficient_permissions");
    let r = call(&c, &user, "POST", "/v1/chat/completions", Some(&chat));
    assert_eq!(r.status, 200, "{}", r.body);
    // A user key may not change the model store.
    let r = call(
        &c,
        &user,
        "DELETE",
        "/api/delete",
        Some(r#"{"model":"smol"}"#),
    );
    assert_eq!(r.status, 403, "{}", r.body);

    // Listings never show keys or hashes; the audit log names the admin key and the peer.
    let listed = call(&c, &admin, "GET", "/api/v1/keys", None);
    let audit = call(&c, &admin, "GET", "/api/v1/audit?limit=1000", None);
    for text in [&listed.body, &audit.body] {
        for secret in [&admin, &user, &readonly, &revoked, &expired] {
            assert!(!text.contains(secret.as_str()), "a key leaked: {text}");
        }
        assert!(!text.contains("hash"), "{text}");
        assert!(!text.contains("correct horse"), "{text}");
    }
    let rows = audit.json()["data"].as_array().unwrap().clone();
    let created = rows
        .iter()
        .find(|a| a["route"] == "/api/v1/keys" && a["method"] == "POST" && a["status"] == 201)
        .unwrap_or_else(|| panic!("no audit row for a key creation: {rows:?}"));
    assert!(
        created["actor"].as_str().unwrap().starts_with("key_"),
        "{created}"
    );
    assert_eq!(created["remote"], "127.0.0.1");
    assert!(rows
        .iter()
        .any(|a| a["route"] == "/api/v1/settings" && a["method"] == "PATCH"));
    // Denied attempts are not rows (an anonymous caller could grow the table): they are
    // counted on /metrics.
    assert!(!rows.iter().any(|a| a["status"] == 401), "{rows:?}");
    let m = call(&c, &admin, "GET", "/metrics", None).body;
    let denied = m
        .lines()
        .find_map(|l| l.strip_prefix("weft:auth_denied_total{status=\"401\"} "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(denied >= 1.0, "{m}");
}
