//! Sign-in for people (issue item 5): a user signs in with name and password and gets an
//! HttpOnly, SameSite=Strict session cookie plus a CSRF token. The cookie is the user's
//! principal (their role, no more); a state change needs the CSRF token and the site checks;
//! wrong passwords back off with 429; signing out or deleting the user ends the session.

use serde_json::json;
use weft_tests::{Response, Server};

use super::raw;
use crate::harness::{call, Db};
use crate::on_both;

const PASSWORD: &str = "correct horse battery";

/// A request as the signed-in page sends it: its own origin, the cookie, the CSRF token.
fn as_page(
    s: &Server,
    method: &str,
    path: &str,
    cookie: &str,
    csrf: Option<&str>,
    origin: Option<&str>,
    body: Option<&str>,
) -> Response {
    let host = format!("127.0.0.1:{}", s.port);
    let own = format!("http://{host}");
    let cookie = format!("weft_session={cookie}");
    let mut h = vec![
        ("Host", host.as_str()),
        ("Cookie", cookie.as_str()),
        ("Origin", origin.unwrap_or(&own)),
    ];
    if let Some(c) = csrf {
        h.push(("X-CSRF-Token", c));
    }
    if body.is_some() {
        h.push(("Content-Type", "application/json"));
    }
    raw(s.port, method, path, &h, body)
}

/// Signs in; the response.
fn sign_in(s: &Server, name: &str, password: &str) -> Response {
    let body = json!({"name": name, "password": password}).to_string();
    s.try_request("POST", "/api/login", Some(&body), &[])
        .expect("POST /api/login")
}

/// The session token a sign-in's `Set-Cookie` carries, after checking its attributes.
fn session_cookie(r: &Response) -> String {
    let set = r.header("set-cookie").expect("a Set-Cookie header");
    let attrs: Vec<String> = set
        .split(';')
        .map(|a| a.trim().to_ascii_lowercase())
        .collect();
    assert!(attrs.contains(&"httponly".to_string()), "{set}");
    assert!(attrs.contains(&"samesite=strict".to_string()), "{set}");
    assert!(attrs.contains(&"path=/".to_string()), "{set}");
    let token = set
        .split(';')
        .next()
        .and_then(|kv| kv.trim().strip_prefix("weft_session="))
        .expect("the weft_session cookie");
    assert!(token.len() >= 40, "{token}");
    token.to_string()
}

fn login_flow(db: &Db) {
    let admin = db.cli_key("admin");
    let s = db.serve(&[]);
    let c = s.client();
    let make = |name: &str, role: &str| {
        let body = json!({"name": name, "password": PASSWORD, "role": role}).to_string();
        let r = call(&c, &admin, "POST", "/api/v1/users", Some(&body));
        assert_eq!(r.status, 201, "{}", r.body);
        r.json()["id"].as_str().unwrap().to_string()
    };
    let ann = make("ann", "user");
    make("bob", "user");

    // Wrong password and unknown user: the same 401, no cookie.
    for (name, pw) in [("ann", "wrong password"), ("nobody", PASSWORD)] {
        let r = sign_in(&s, name, pw);
        assert_eq!(r.status, 401, "{}", r.body);
        assert!(r.header("set-cookie").is_none());
        assert!(r.body.contains("wrong user name or password"), "{}", r.body);
    }
    // The right one: a cookie and a CSRF token.
    let r = sign_in(&s, "ann", PASSWORD);
    assert_eq!(r.status, 200, "{}", r.body);
    let token = session_cookie(&r);
    let j = r.json();
    assert_eq!(j["user"]["name"], "ann");
    assert_eq!(j["user"]["id"], ann.as_str());
    let csrf = j["csrfToken"].as_str().expect("csrfToken").to_string();
    assert_ne!(csrf, token);
    assert!(
        !r.body.contains(&token),
        "the cookie's token must not be in the body"
    );

    // The cookie is ann's principal, with ann's role: a user may chat and list models, not
    // administer.
    let r = as_page(&s, "GET", "/api/models", &token, None, None, None);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = as_page(&s, "GET", "/api/v1/keys", &token, None, None, None);
    assert_eq!(r.status, 403, "{}", r.body);
    // After a reload the page gets its CSRF token back.
    let r = as_page(&s, "GET", "/api/login", &token, None, None, None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["csrfToken"], csrf.as_str());

    // A state change on the cookie needs the CSRF token (a page elsewhere cannot read it).
    let r = as_page(&s, "POST", "/api/sessions", &token, None, None, None);
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(r.body.contains("CSRF"), "{}", r.body);
    let r = as_page(
        &s,
        "POST",
        "/api/sessions",
        &token,
        Some("forged"),
        None,
        None,
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let r = as_page(&s, "POST", "/api/sessions", &token, Some(&csrf), None, None);
    assert!(r.status < 300, "{} {}", r.status, r.body);
    // Even with the token, another origin is refused (the site layer comes first).
    let r = as_page(
        &s,
        "POST",
        "/api/sessions",
        &token,
        Some(&csrf),
        Some("http://attacker.example"),
        None,
    );
    assert_eq!(r.status, 403, "{}", r.body);
    // An admin route with the token is still a user's request.
    let r = as_page(
        &s,
        "POST",
        "/api/v1/keys",
        &token,
        Some(&csrf),
        None,
        Some(r#"{"name":"x","role":"admin"}"#),
    );
    assert_eq!(r.status, 403, "{}", r.body);

    // A made-up cookie is nobody.
    let r = as_page(&s, "GET", "/api/models", "made-up-token", None, None, None);
    assert_eq!(r.status, 401, "{}", r.body);
    // API clients keep their keys: a key wins over a cookie.
    let r = raw(
        s.port,
        "GET",
        "/api/v1/keys",
        &[
            ("Host", "127.0.0.1"),
            ("Cookie", &format!("weft_session={token}")),
            ("Authorization", &format!("Bearer {admin}")),
        ],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);

    // Signing out ends the session.
    let r = as_page(&s, "POST", "/api/logout", &token, Some(&csrf), None, None);
    assert_eq!(r.status, 204, "{}", r.body);
    assert!(r
        .header("set-cookie")
        .is_some_and(|c| c.contains("Max-Age=0")));
    let r = as_page(&s, "GET", "/api/models", &token, None, None, None);
    assert_eq!(r.status, 401, "{}", r.body);

    // Deleting the user ends their sessions at once.
    let r = sign_in(&s, "ann", PASSWORD);
    let token = session_cookie(&r);
    assert_eq!(
        as_page(&s, "GET", "/api/models", &token, None, None, None).status,
        200
    );
    let r = call(&c, &admin, "DELETE", &format!("/api/v1/users/{ann}"), None);
    assert!(r.status < 300, "{}", r.body);
    let r = as_page(&s, "GET", "/api/models", &token, None, None, None);
    assert_eq!(r.status, 401, "{}", r.body);

    // Guessing backs off: after a few wrong passwords even the right one waits (429).
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(sign_in(&s, "bob", "not the password").status);
    }
    assert_eq!(statuses, vec![401; 5]);
    let r = sign_in(&s, "bob", PASSWORD);
    assert_eq!(r.status, 429, "{}", r.body);
    let wait: u64 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!(wait >= 1, "{wait}");
    assert!(r.header("set-cookie").is_none());
}
on_both!(login_flow, login_flow_sqlite, login_flow_postgres);

/// The chat page's sign-in dialog in headless Chromium (tests/browser/sign_in.mjs).
#[test]
fn chat_page_sign_in_in_chromium() {
    if !weft_tests::browser::ready("the sign-in browser test", false) {
        return;
    }
    let Some(db) = Db::new(crate::harness::Backend::Sqlite, "sign_in_chromium") else {
        return;
    };
    let admin = db.cli_key("admin");
    let s = db.serve(&[]);
    let body = json!({"name": "cara", "password": PASSWORD, "role": "user"}).to_string();
    let r = call(&s.client(), &admin, "POST", "/api/v1/users", Some(&body));
    assert_eq!(r.status, 201, "{}", r.body);
    let out = std::process::Command::new("node")
        .arg(super::browser::root().join("tests/browser/sign_in.mjs"))
        .current_dir(super::browser::root().join("tests/browser"))
        .env("WEFT_BASE", s.base())
        .env("WEFT_USER", "cara")
        .env("WEFT_PASSWORD", PASSWORD)
        .output()
        .expect("running node tests/browser/sign_in.mjs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "sign_in.mjs failed: {stdout}");
    let j: serde_json::Value =
        serde_json::from_str(stdout.trim().lines().last().unwrap_or("")).expect("a JSON line");
    assert!(
        j["wrong"]
            .as_str()
            .is_some_and(|w| w.contains("wrong user name or password")),
        "{j}"
    );
    assert!(
        j["models"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m == "smol")),
        "{j}"
    );
    assert_eq!(j["cookie"]["httpOnly"], true, "{j}");
    assert_eq!(j["cookie"]["sameSite"], "Strict", "{j}");
    assert_eq!(j["scriptSeesCookie"], false, "{j}");
    assert!(j["newChat"].as_u64().is_some_and(|s| s < 300), "{j}");
    assert_eq!(j["errors"], json!([]), "{j}");
}
