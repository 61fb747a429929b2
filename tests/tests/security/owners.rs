//! Everything stored has an owner (issue 33, failure 2): two user keys A and B, and a key of
//! another tenant, try each other's chat-UI sessions (read, continue, delete), default
//! sessions, uploads (download, read through `textFilePaths`, delete with the session) and
//! model jobs (two admin keys: show, list, cancel). Every attempt on another principal's thing
//! is the 404 of a missing id, word for word, and the owner still has its thing afterwards.
//! Ids are 128 random bits. The sandbox workspace and its artifacts are in `owners/workspace.rs`
//! (they need `--code-exec` and a tool-calling model). SQLite and Postgres alike.

#[path = "owners/workspace.rs"]
mod workspace;

use std::io::Read;

use serde_json::{json, Value};
use weft_tests::{send, Client, Response};

use crate::harness::{api_key, call, Backend, Db};
use crate::on_both;

/// The principals of a table: two user keys of no tenant, a user key of a tenant, an admin.
pub struct Keys {
    pub admin: String,
    pub a: String,
    pub b: String,
    pub tenant: String,
}

impl Keys {
    pub fn new(db: &Db, c: &Client) -> Keys {
        let admin = db.cli_key("admin");
        let a = db.cli_key("user");
        let b = db.cli_key("user");
        let r = call(
            c,
            &admin,
            "POST",
            "/api/v1/tenants",
            Some(&json!({"name": "other"}).to_string()),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let t = r.json()["id"].as_str().unwrap().to_string();
        let (_, tenant) = api_key(
            c,
            &admin,
            json!({"name": "other-tenant", "role": "user", "tenant": t}),
        );
        Keys {
            admin,
            a,
            b,
            tenant,
        }
    }
}

pub fn error_of(r: &Response) -> String {
    r.json()["error"].as_str().unwrap_or_default().to_string()
}

/// Asserts `r` is exactly the 404 that `missing` (the same request naming an id that never
/// existed, `missing_id`) got, with `id` in place of `missing_id`: existence is not told.
pub fn same_as_missing(r: &Response, missing: &Response, missing_id: &str, id: &str, what: &str) {
    assert_eq!(
        missing.status, 404,
        "{what}, the missing id: {}",
        missing.body
    );
    assert_eq!(r.status, 404, "{what}: {}", r.body);
    assert_eq!(
        error_of(r),
        error_of(missing).replace(missing_id, id),
        "{what}: another principal's id is answered like a missing one"
    );
}

/// A chat-UI turn of `key` (no session id: the key's default session); the response.
fn ui_chat(c: &Client, key: &str, sid: Option<&str>, text: &str) -> Response {
    let mut body = json!({"model": "smol", "maxTokens": 3, "temperature": 0,
        "messages": [{"role": "user", "content": text}]});
    if let Some(s) = sid {
        body["sessionId"] = json!(s);
    }
    call(c, key, "POST", "/api/ui/chat", Some(&body.to_string()))
}

/// The done frame of a chat-UI stream.
fn done(r: &Response) -> Value {
    assert_eq!(r.status, 200, "{}", r.body);
    let d: Value = serde_json::from_str(r.sse_data().last().expect("frames")).unwrap();
    assert_eq!(d["done"], true, "{d}");
    assert!(d["error"].is_null(), "{d}");
    d
}

fn history(c: &Client, key: &str, sid: &str) -> Response {
    call(c, key, "GET", &format!("/api/sessions/{sid}"), None)
}

fn new_session(c: &Client, key: &str) -> String {
    let r = call(c, key, "POST", "/api/sessions", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["sessionId"].as_str().unwrap().to_string()
}

/// An id of the shape the server gives that no session has.
fn never_made() -> String {
    "0123456789abcdef0123456789abcdef".into()
}

fn sessions_belong_to_their_owner(db: &Db) {
    let s = db.serve(&[]);
    let c = s.client();
    let k = Keys::new(db, &c);
    let sid = new_session(&c, &k.a);
    done(&ui_chat(
        &c,
        &k.a,
        Some(&sid),
        "The code word is swordfish.",
    ));
    let mine = history(&c, &k.a, &sid);
    assert_eq!(mine.status, 200, "{}", mine.body);
    assert!(mine.body.contains("swordfish"), "{}", mine.body);

    let none = never_made();
    for (who, key) in [
        ("B", &k.b),
        ("another tenant", &k.tenant),
        ("an admin", &k.admin),
    ] {
        // Read.
        let missing = history(&c, key, &none);
        let r = history(&c, key, &sid);
        same_as_missing(
            &r,
            &missing,
            &none,
            &sid,
            &format!("{who} reads A's session"),
        );
        assert!(!r.body.contains("swordfish"));
        // Continue.
        let missing = ui_chat(&c, key, Some(&none), "What is the code word?");
        let r = ui_chat(&c, key, Some(&sid), "What is the code word?");
        same_as_missing(
            &r,
            &missing,
            &none,
            &sid,
            &format!("{who} continues A's session"),
        );
        // Continue through /api/chat's chat-UI shape.
        let body = json!({"sessionId": sid, "maxTokens": 3,
            "messages": [{"role": "user", "content": "What is the code word?"}]});
        let r = call(&c, key, "POST", "/api/chat", Some(&body.to_string()));
        assert_eq!(
            r.status, 404,
            "{who} continues A's session via /api/chat: {}",
            r.body
        );
        // Delete.
        let missing = call(&c, key, "DELETE", &format!("/api/sessions/{none}"), None);
        let r = call(&c, key, "DELETE", &format!("/api/sessions/{sid}"), None);
        same_as_missing(
            &r,
            &missing,
            &none,
            &sid,
            &format!("{who} deletes A's session"),
        );
    }
    // A still has its session, unchanged by the attempts.
    let after = history(&c, &k.a, &sid);
    assert_eq!(after.status, 200, "{}", after.body);
    assert_eq!(
        after.json(),
        mine.json(),
        "A's conversation after the attempts"
    );
    let r = call(&c, &k.a, "DELETE", &format!("/api/sessions/{sid}"), None);
    assert_eq!(r.status, 200, "A deletes its own session: {}", r.body);
    assert_eq!(history(&c, &k.a, &sid).status, 404);
}

on_both!(
    sessions_belong_to_their_owner,
    sessions_belong_to_their_owner_sqlite,
    sessions_belong_to_their_owner_postgres
);

fn each_principal_has_its_own_default_session(db: &Db) {
    let s = db.serve(&[]);
    let c = s.client();
    let k = Keys::new(db, &c);
    // A and B chat without a session id.
    let da = done(&ui_chat(&c, &k.a, None, "The code word is swordfish."));
    let db_ = done(&ui_chat(&c, &k.b, None, "Hello."));
    let (sa, sb) = (
        da["sessionId"].as_str().unwrap().to_string(),
        db_["sessionId"].as_str().unwrap().to_string(),
    );
    assert_ne!(sa, sb, "each principal has its own default session");
    // B's default session holds B's turn only: none of A's history.
    let hb = history(&c, &k.b, &sb);
    assert_eq!(hb.status, 200, "{}", hb.body);
    assert_eq!(
        hb.json()["messages"].as_array().unwrap().len(),
        2,
        "{}",
        hb.body
    );
    assert!(
        !hb.body.contains("swordfish"),
        "B sees A's history: {}",
        hb.body
    );
    // B's next turn without a session id continues B's session, not A's: its prompt holds
    // B's two earlier messages, as A's turn shows for A.
    let b2 = done(&ui_chat(&c, &k.b, None, "Again."));
    assert_eq!(b2["sessionId"], sb.as_str());
    assert_eq!(
        history(&c, &k.b, &sb).json()["messages"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    // A's default session is A's alone, by its id too.
    let none = never_made();
    for (who, key) in [("B", &k.b), ("another tenant", &k.tenant)] {
        let missing = history(&c, key, &none);
        let r = history(&c, key, &sa);
        same_as_missing(
            &r,
            &missing,
            &none,
            &sa,
            &format!("{who} reads A's default session"),
        );
        let missing = ui_chat(&c, key, Some(&none), "What is the code word?");
        let r = ui_chat(&c, key, Some(&sa), "What is the code word?");
        same_as_missing(
            &r,
            &missing,
            &none,
            &sa,
            &format!("{who} continues A's default"),
        );
        let missing = call(&c, key, "DELETE", &format!("/api/sessions/{none}"), None);
        let r = call(&c, key, "DELETE", &format!("/api/sessions/{sa}"), None);
        same_as_missing(
            &r,
            &missing,
            &none,
            &sa,
            &format!("{who} deletes A's default"),
        );
    }
    let ha = history(&c, &k.a, &sa);
    assert_eq!(ha.status, 200, "{}", ha.body);
    assert!(ha.body.contains("swordfish"), "{}", ha.body);
    assert_eq!(
        ha.json()["messages"].as_array().unwrap().len(),
        2,
        "{}",
        ha.body
    );
}

on_both!(
    each_principal_has_its_own_default_session,
    each_principal_has_its_own_default_session_sqlite,
    each_principal_has_its_own_default_session_postgres
);

const BOUNDARY: &str = "weft-owners-boundary";

/// `POST /api/upload` with `key`: one text file, into `sid` (none: the key's default session).
fn upload(c: &Client, key: &str, sid: Option<&str>, name: &str, text: &str) -> Response {
    let mut body = Vec::new();
    if let Some(s) = sid {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"sessionId\"\r\n\r\n{s}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
             Content-Type: text/plain\r\n\r\n{text}\r\n--{BOUNDARY}--\r\n"
        )
        .as_bytes(),
    );
    let ctype = format!("multipart/form-data; boundary={BOUNDARY}");
    let auth = format!("Bearer {key}");
    let mut s = c.connect().unwrap();
    send(
        &mut s,
        "POST",
        "/api/upload",
        Some(&body),
        &[("Content-Type", &ctype), ("Authorization", &auth)],
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    Response::parse(&raw)
}

/// A chat-UI turn of `key` that attaches upload `name` (from `sid`, or the default session).
fn chat_with_file(c: &Client, key: &str, sid: Option<&str>, name: &str) -> Response {
    let mut body = json!({"model": "smol", "maxTokens": 2,
        "messages": [{"role": "user", "content": "Summarize the file.",
                      "textFilePaths": [name]}]});
    if let Some(s) = sid {
        body["sessionId"] = json!(s);
    }
    call(c, key, "POST", "/api/ui/chat", Some(&body.to_string()))
}

/// The same turn naming upload `name` in `imagePaths` (the chat UI's images).
fn chat_with_image(c: &Client, key: &str, name: &str) -> Response {
    let body = json!({"model": "smol", "maxTokens": 2,
        "messages": [{"role": "user", "content": "Describe the picture.",
                      "imagePaths": [name]}]});
    call(c, key, "POST", "/api/ui/chat", Some(&body.to_string()))
}

fn uploads_belong_to_their_owner(db: &Db) {
    let s = db.serve(&[]);
    let c = s.client();
    let k = Keys::new(db, &c);
    let secret = "The vault code is 7-4-1-9.";
    let sid = new_session(&c, &k.a);
    // In a session of A's, and in A's default session.
    let mut files = Vec::new();
    for session in [Some(sid.as_str()), None] {
        let r = upload(&c, &k.a, session, "vault.txt", secret);
        assert_eq!(r.status, 200, "{}", r.body);
        let f = r.json();
        let (name, url) = (f["file"].as_str().unwrap(), f["url"].as_str().unwrap());
        let own = call(&c, &k.a, "GET", url, None);
        assert_eq!(own.status, 200, "A downloads its upload: {}", own.body);
        assert_eq!(own.body.trim_end(), secret);
        files.push((session, name.to_string(), url.to_string()));
    }
    // A name of the right shape that was never uploaded.
    let none = "0123456789abcdef0123456789abcdef.txt";
    for (who, key) in [
        ("B", &k.b),
        ("another tenant", &k.tenant),
        ("an admin", &k.admin),
    ] {
        for (session, name, url) in &files {
            // Download, by the URL A got and by the name alone.
            let missing = call(&c, key, "GET", &url.replace(name.as_str(), none), None);
            let r = call(&c, key, "GET", url, None);
            same_as_missing(&r, &missing, none, name, &format!("{who} downloads {url}"));
            let r = call(&c, key, "GET", &format!("/uploads/{name}"), None);
            assert_eq!(r.status, 404, "{who}: {}", r.body);
            assert!(!r.body.contains("vault code"));
            // Read: attach it to a chat (into the named session, or the caller's default).
            let missing = chat_with_file(&c, key, None, none);
            let r = chat_with_file(&c, key, None, name);
            assert!(r.status >= 400, "{who} attaches A's upload: {}", r.body);
            assert_eq!(r.status, missing.status, "{}", r.body);
            assert_eq!(error_of(&r), error_of(&missing).replace(none, name));
            // The same through imagePaths: found (or not) the same way.
            let missing = chat_with_image(&c, key, none);
            let r = chat_with_image(&c, key, name);
            assert_eq!(
                r.status, 400,
                "{who} names A's upload as an image: {}",
                r.body
            );
            assert_eq!(error_of(&r), error_of(&missing).replace(none, name));
            if let Some(sid) = session {
                let r = chat_with_file(&c, key, Some(sid), name);
                assert!(matches!(r.status, 400 | 404), "{who}: {}", r.body);
                assert!(!r.body.contains("vault code"), "{}", r.body);
                // Upload into A's session.
                let r = upload(&c, key, Some(sid), "x.txt", "mine now");
                let missing = upload(&c, key, Some(&never_made()), "x.txt", "mine now");
                same_as_missing(&r, &missing, &never_made(), sid, &format!("{who} uploads"));
                // Delete (uploads go with their session).
                let r = call(&c, key, "DELETE", &format!("/api/sessions/{sid}"), None);
                assert_eq!(r.status, 404, "{who} deletes A's session: {}", r.body);
            }
        }
    }
    // A still has both files, and reads them in its chat.
    for (session, name, url) in &files {
        let r = call(&c, &k.a, "GET", url, None);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body.trim_end(), secret);
        let r = chat_with_file(&c, &k.a, *session, name);
        done(&r);
    }
}

on_both!(
    uploads_belong_to_their_owner,
    uploads_belong_to_their_owner_sqlite,
    uploads_belong_to_their_owner_postgres
);

/// Starts a job of `key` that fails on its own (quantizing a model the store does not have).
fn start_job(c: &Client, key: &str) -> String {
    let body = json!({"model": "no-such-model", "name": "never", "type": "Q8_0"});
    let r = call(
        c,
        key,
        "POST",
        "/api/v1/models/quantize",
        Some(&body.to_string()),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    r.json()["job_id"].as_str().unwrap().to_string()
}

fn listed(c: &Client, key: &str, query: &str) -> Vec<String> {
    let r = call(c, key, "GET", &format!("/api/v1/jobs{query}"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect()
}

fn jobs_belong_to_their_owner(db: &Db) {
    let store = db.home.join("store");
    std::fs::create_dir_all(&store).unwrap();
    let s = db.serve(&["--models-dir", &store.display().to_string()]);
    let c = s.client();
    // Jobs are admin work: two admin keys, A and B.
    let (a, b) = (db.cli_key("admin"), db.cli_key("admin"));
    let id = start_job(&c, &a);
    let own = call(&c, &a, "GET", &format!("/api/v1/models/jobs/{id}"), None);
    assert_eq!(own.status, 200, "{}", own.body);
    assert_eq!(listed(&c, &a, ""), [id.as_str()]);

    // B neither sees, lists nor cancels it.
    let none = "job-0123456789abcdef0123456789abcdef";
    let missing = call(&c, &b, "GET", &format!("/api/v1/models/jobs/{none}"), None);
    let r = call(&c, &b, "GET", &format!("/api/v1/models/jobs/{id}"), None);
    same_as_missing(&r, &missing, none, &id, "B shows A's job");
    let missing = call(&c, &b, "POST", &format!("/api/v1/jobs/{none}/cancel"), None);
    let r = call(&c, &b, "POST", &format!("/api/v1/jobs/{id}/cancel"), None);
    same_as_missing(&r, &missing, none, &id, "B cancels A's job");
    assert!(listed(&c, &b, "").is_empty(), "B lists A's job");
    let bid = start_job(&c, &b);
    assert_eq!(listed(&c, &b, ""), [bid.as_str()]);
    assert_eq!(listed(&c, &a, ""), [id.as_str()], "A lists B's job");

    // An admin reaches everyone's only by asking.
    let mut all = listed(&c, &b, "?owner=all");
    all.sort();
    let mut want = vec![id.clone(), bid.clone()];
    want.sort();
    assert_eq!(all, want);
    let r = call(
        &c,
        &b,
        "GET",
        &format!("/api/v1/models/jobs/{id}?owner=all"),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // A still has its job.
    let r = call(&c, &a, "GET", &format!("/api/v1/models/jobs/{id}"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["id"], id.as_str());

    // Job ids are 128 random bits.
    for j in [&id, &bid] {
        let hex = j.strip_prefix("job-").unwrap_or_else(|| panic!("{j}"));
        assert!(is_hex128(hex), "{j}");
    }
}

on_both!(
    jobs_belong_to_their_owner,
    jobs_belong_to_their_owner_sqlite,
    jobs_belong_to_their_owner_postgres
);

/// 32 lowercase hex digits: 128 bits.
pub fn is_hex128(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// Session ids, upload names and completion ids: 128 random bits, none repeated among 1000.
fn ids_are_128_random_bits(db: &Db) {
    let s = db.serve(&[]);
    let c = s.client();
    let key = db.cli_key("user");
    let mut seen = std::collections::HashSet::new();
    for _ in 0..1000 {
        let id = new_session(&c, &key);
        assert!(is_hex128(&id), "{id}");
        assert!(seen.insert(id.clone()), "{id} repeated");
    }
    let r = upload(&c, &key, None, "a.txt", "a");
    assert_eq!(r.status, 200, "{}", r.body);
    let name = r.json()["file"].as_str().unwrap().to_string();
    assert!(is_hex128(name.strip_suffix(".txt").unwrap()), "{name}");
    let body = json!({"model": "smol", "max_tokens": 1,
        "messages": [{"role": "user", "content": "Hi"}]});
    let r = call(
        &c,
        &key,
        "POST",
        "/v1/chat/completions",
        Some(&body.to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["id"].as_str().unwrap().to_string();
    assert!(is_hex128(id.strip_prefix("chatcmpl-").unwrap()), "{id}");
}

#[test]
fn ids_are_128_random_bits_sqlite() {
    if let Some(db) = Db::new(Backend::Sqlite, "owner-ids") {
        ids_are_128_random_bits(&db);
    }
}
