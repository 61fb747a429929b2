//! Chat-UI sessions live in the database: a conversation survives a restart of the server
//! (SQLite and Postgres), and on Postgres a session made on one replica continues on the other.

use serde_json::{json, Value};

use crate::harness::{call, Backend, Db};
use crate::on_both;
use weft_tests::{Client, Server};

fn new_session(c: &Client) -> String {
    let r = call(c, "", "POST", "/api/sessions", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["sessionId"].as_str().unwrap().to_string()
}

/// One chat-UI turn sending only `text`; the done frame.
fn turn(c: &Client, sid: &str, text: &str) -> Value {
    let body = json!({"model": "smol", "sessionId": sid, "maxTokens": 4, "temperature": 0,
        "messages": [{"role": "user", "content": text}]});
    let r = call(c, "", "POST", "/api/ui/chat", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let done: Value = serde_json::from_str(r.sse_data().last().expect("frames")).unwrap();
    assert_eq!(done["done"], true, "{done}");
    assert!(done["error"].is_null(), "{done}");
    done
}

fn history(c: &Client, sid: &str) -> Value {
    let r = call(c, "", "GET", &format!("/api/sessions/{sid}"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["messages"].clone()
}

/// Stops a server as an operator does (SIGTERM: running replies end, stored turns land).
fn stop(mut s: Server) {
    let pid = s.pid().to_string();
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .is_ok_and(|st| st.success());
    assert!(ok, "kill -TERM {pid}");
    assert!(s.wait().success(), "weft serve exits cleanly on SIGTERM");
}

fn sessions_survive_a_restart(db: &Db) {
    let s = db.serve(&[]);
    let c = s.client();
    let sid = new_session(&c);
    let first = turn(&c, &sid, "Say hi.");
    let before = history(&c, &sid);
    assert_eq!(before.as_array().unwrap().len(), 2, "{before}");
    stop(s);

    let s = db.serve(&[]);
    let c = s.client();
    assert_eq!(
        history(&c, &sid),
        before,
        "the conversation after a restart"
    );
    // The next turn sends only its own message: the stored turn is part of the prompt.
    let second = turn(&c, &sid, "Again.");
    assert!(
        second["promptTokens"].as_u64() > first["promptTokens"].as_u64(),
        "{first} then {second}"
    );
    assert_eq!(history(&c, &sid).as_array().unwrap().len(), 4);
    let r = call(&c, "", "DELETE", &format!("/api/sessions/{sid}"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = call(&c, "", "GET", &format!("/api/sessions/{sid}"), None);
    assert_eq!(r.status, 404, "{}", r.body);
    let body = json!({"model": "smol", "sessionId": sid, "maxTokens": 2,
        "messages": [{"role": "user", "content": "Hi"}]});
    let r = call(&c, "", "POST", "/api/ui/chat", Some(&body.to_string()));
    assert_eq!(r.status, 404, "a deleted session is gone: {}", r.body);
    stop(s);

    // Nor does a restart bring it back.
    let s = db.serve(&[]);
    let r = call(
        &s.client(),
        "",
        "GET",
        &format!("/api/sessions/{sid}"),
        None,
    );
    assert_eq!(r.status, 404, "{}", r.body);
}
on_both!(
    sessions_survive_a_restart,
    sessions_survive_a_restart_sqlite,
    sessions_survive_a_restart_postgres
);

#[test]
fn a_session_continues_on_another_replica() {
    let Some(db) = Db::new(Backend::Postgres, "session-replicas") else {
        return;
    };
    let a = db.serve(&[]);
    let b = db.serve(&[]);
    let (ca, cb) = (a.client(), b.client());
    let sid = new_session(&ca);
    turn(&ca, &sid, "Say hi.");
    // The writer lands the turn just after the reply ends; the other replica reads the
    // database, so wait for it there (bounded) rather than assume an order.
    let mut seen = Value::Null;
    for _ in 0..100 {
        seen = history(&cb, &sid);
        if seen.as_array().is_some_and(|m| m.len() == 2) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(seen, history(&ca, &sid), "replica B sees A's turn");
    turn(&cb, &sid, "Again.");
    let r = call(&cb, "", "DELETE", &format!("/api/sessions/{sid}"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = call(&ca, "", "GET", &format!("/api/sessions/{sid}"), None);
    assert_eq!(r.status, 404, "deleted on B, gone on A: {}", r.body);
}
