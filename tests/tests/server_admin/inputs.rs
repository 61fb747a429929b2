//! Bad input to the admin plane: each a clear 4xx in the `/api` error shape, never a 500, and
//! the server keeps serving.

use serde_json::json;

use crate::harness::{api_key, call, Db};
use crate::on_both;

on_both!(bad_input, bad_input_sqlite, bad_input_postgres);

fn bad_input(db: &Db) {
    let admin = db.cli_key("admin");
    let server = db.serve(&["--body-limit", "4096"]);
    let c = server.client();
    let (_, user) = api_key(&c, &admin, json!({"name": "taken", "role": "user"}));
    let r = call(
        &c,
        &admin,
        "POST",
        "/api/v1/users",
        Some(&json!({"name": "ann", "password": "long enough", "role": "user"}).to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let ann = r.json()["id"].as_str().unwrap().to_string();
    let r = call(
        &c,
        &admin,
        "POST",
        "/api/v1/tenants",
        Some(r#"{"name":"acme"}"#),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let big = format!(r#"{{"name":"{}","role":"user"}}"#, "x".repeat(10_000));
    let cases: Vec<(&str, String, String, u16)> = vec![
        ("POST", "/api/v1/keys".into(), "{not json".into(), 400),
        ("POST", "/api/v1/keys".into(), "[1, 2]".into(), 400),
        (
            "POST",
            "/api/v1/keys".into(),
            r#"{"name": 5, "role": "user"}"#.into(),
            400,
        ),
        (
            "POST",
            "/api/v1/keys".into(),
            r#"{"name": "a", "role": "superuser"}"#.into(),
            400,
        ),
        (
            "POST",
            "/api/v1/keys".into(),
            r#"{"name": "a", "role": "user", "colour": 1}"#.into(),
            400,
        ),
        (
            "POST",
            "/api/v1/keys".into(),
            r#"{"name": "", "role": "user"}"#.into(),
            400,
        ),
        (
            "POST",
            "/api/v1/keys".into(),
            r#"{"name": "a", "role": "user", "expires_at": 1}"#.into(),
            400,
        ),
        (
            "POST",
            "/api/v1/keys".into(),
            r#"{"name": "a", "role": "user", "expires_at": "soon"}"#.into(),
            400,
        ),
        (
            "POST",
            "/api/v1/keys".into(),
            r#"{"name": "a", "role": "user", "tenant": "tenant_nope"}"#.into(),
            400,
        ),
        (
            "POST",
            "/api/v1/keys".into(),
            r#"{"name": "a", "role": "user", "rate_limit_rpm": -1}"#.into(),
            400,
        ),
        (
            "POST",
            "/api/v1/keys".into(),
            r#"{"name": "taken", "role": "user"}"#.into(),
            409,
        ),
        ("POST", "/api/v1/keys".into(), big, 413),
        ("DELETE", "/api/v1/keys/key_nope".into(), String::new(), 404),
        (
            "PATCH",
            "/api/v1/settings".into(),
            r#"{"nope": 1}"#.into(),
            400,
        ),
        (
            "PATCH",
            "/api/v1/settings".into(),
            r#"{"temperature": "hot"}"#.into(),
            400,
        ),
        (
            "PATCH",
            "/api/v1/settings".into(),
            r#"{"top_k": 1.5}"#.into(),
            400,
        ),
        (
            "PATCH",
            "/api/v1/settings".into(),
            r#"{"temperature": -1}"#.into(),
            400,
        ),
        ("POST", "/api/v1/settings".into(), "null".into(), 400),
        (
            "POST",
            "/api/v1/users".into(),
            r#"{"name": "ann", "password": "long enough", "role": "user"}"#.into(),
            409,
        ),
        (
            "POST",
            "/api/v1/users".into(),
            r#"{"name": "bob", "password": "short", "role": "user"}"#.into(),
            400,
        ),
        (
            "POST",
            "/api/v1/users".into(),
            r#"{"name": "bob", "role": "user"}"#.into(),
            400,
        ),
        (
            "PATCH",
            format!("/api/v1/users/{ann}"),
            r#"{"role": "root"}"#.into(),
            400,
        ),
        (
            "PATCH",
            format!("/api/v1/users/{ann}"),
            r#"{"tenant": "tenant_nope"}"#.into(),
            400,
        ),
        (
            "PATCH",
            "/api/v1/users/user_nope".into(),
            r#"{"role": "user"}"#.into(),
            404,
        ),
        (
            "DELETE",
            "/api/v1/users/user_nope".into(),
            String::new(),
            404,
        ),
        (
            "POST",
            "/api/v1/tenants".into(),
            r#"{"name": "acme"}"#.into(),
            409,
        ),
        (
            "POST",
            "/api/v1/tenants".into(),
            r#"{"name": "b", "token_quota": -5}"#.into(),
            400,
        ),
        (
            "GET",
            "/api/v1/tenants/tenant_nope".into(),
            String::new(),
            404,
        ),
        ("GET", "/api/v1/audit?limit=0".into(), String::new(), 400),
        ("GET", "/api/v1/audit?limit=many".into(), String::new(), 400),
    ];
    for (method, path, body, status) in &cases {
        let body = (!body.is_empty()).then_some(body.as_str());
        let r = call(&c, &admin, method, path, body);
        assert_eq!(r.status, *status, "{method} {path} {body:?}: {}", r.body);
        let msg = r.json()["error"].as_str().map(str::to_string);
        assert!(
            msg.is_some_and(|m| !m.is_empty()),
            "{method} {path}: {}",
            r.body
        );
    }
    // A user key may not make itself an admin.
    let r = call(
        &c,
        &user,
        "POST",
        "/api/v1/keys",
        Some(r#"{"name": "mine", "role": "admin"}"#),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let r = call(
        &c,
        &user,
        "PATCH",
        &format!("/api/v1/users/{ann}"),
        Some(r#"{"role": "admin"}"#),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    // Still serving, and nothing half-made.
    assert_eq!(call(&c, "", "GET", "/health", None).status, 200);
    let keys = call(&c, &admin, "GET", "/api/v1/keys", None).json();
    let names: Vec<&str> = keys["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // A user that exists can be changed and removed.
    let r = call(
        &c,
        &admin,
        "PATCH",
        &format!("/api/v1/users/{ann}"),
        Some(r#"{"role": "readonly", "password": "another long one"}"#),
    );
    assert_eq!(
        (r.status, r.json()["role"].as_str()),
        (200, Some("readonly")),
        "{}",
        r.body
    );
    assert_eq!(
        call(&c, &admin, "DELETE", &format!("/api/v1/users/{ann}"), None).status,
        200
    );
    assert_eq!(
        call(&c, &admin, "GET", &format!("/api/v1/users/{ann}"), None).status,
        404
    );
}
