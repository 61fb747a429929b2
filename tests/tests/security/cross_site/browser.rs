//! The cross-site attacks from a real browser: headless Chromium loads an attacker's page
//! from a second loopback origin (a tiny HTTP server on another port, in this test), whose
//! no-cors fetches and form posts aim at `/api/v1/keys` and `/api/pull` of a `weft serve` in
//! open mode; a rebinding name (attacker.test → 127.0.0.1) loads the server's page. Driven by
//! tests/browser/cross_site.mjs; afterwards the server holds no key and no job, while its own
//! page (by 127.0.0.1 and localhost) still works.
//!
//! Needs `node`, `chromium` and `npm ci` in tests/browser; skips loudly when one is missing,
//! fails under CI.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::{job_count, key_count};
use crate::harness::{Backend, Db};

pub(super) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The attacker's page: fetches a page may send anywhere without asking (no-cors, a
/// `text/plain` or untyped body), one that needs a preflight (JSON), and two forms.
fn attack_page(target: &str) -> String {
    format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><title>attacker</title></head><body>
<form id="plain-key" method="POST" action="{target}/api/v1/keys" enctype="text/plain" target="sink1">
<input name='{{"name":"form","role":"admin","x":"' value='"}}'></form>
<form id="urlencoded-pull" method="POST" action="{target}/api/pull" target="sink2">
<input name="model" value="hf.co/attacker/model:Q4_0"></form>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<script>
window.attack = async () => {{
  const t = "{target}";
  const key = JSON.stringify({{ name: "csrf", role: "admin" }});
  const shots = [
    ["no-cors text/plain key", t + "/api/v1/keys", {{ method: "POST", mode: "no-cors", headers: {{ "Content-Type": "text/plain" }}, body: key }}],
    ["no-cors Blob key", t + "/api/v1/keys", {{ method: "POST", mode: "no-cors", body: new Blob([key]) }}],
    ["no-cors text/plain pull", t + "/api/pull", {{ method: "POST", mode: "no-cors", headers: {{ "Content-Type": "text/plain" }}, body: JSON.stringify({{ model: "hf.co/attacker/model:Q4_0", stream: false }}) }}],
    ["cors JSON key", t + "/api/v1/keys", {{ method: "POST", headers: {{ "Content-Type": "application/json" }}, body: key }}],
  ];
  const out = [];
  for (const [name, url, init] of shots) {{
    try {{
      const r = await fetch(url, init);
      out.push({{ name, type: r.type, status: r.status }});
    }} catch (e) {{
      out.push({{ name, error: String(e) }});
    }}
  }}
  return out;
}};
</script></body></html>"#
    )
}

/// Serves `page` for every request on a fresh loopback port (a thread for the test's life).
fn serve_page(page: String) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("binding the attacker's port");
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in l.incoming().map_while(Result::ok) {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                page.len()
            );
            let _ = c.write_all(head.as_bytes());
            let _ = c.write_all(page.as_bytes());
        }
    });
    port
}

#[test]
fn foreign_page_in_chromium_makes_no_key_and_no_pull() {
    if !weft_tests::browser::ready("the cross-site browser test", false) {
        return;
    }
    let Some(db) = Db::new(Backend::Sqlite, "cross_site_browser") else {
        return;
    };
    let models = db.home.join("models");
    std::fs::create_dir_all(&models).unwrap();
    let s = db.serve(&["--models-dir", &models.display().to_string()]);
    assert_eq!(key_count(&s, ""), 0, "the server must start in open mode");
    let base = s.base();
    let attacker = serve_page(attack_page(&base));
    let out = Command::new("node")
        .arg(root().join("tests/browser/cross_site.mjs"))
        .current_dir(root().join("tests/browser"))
        .env("WEFT_BASE", &base)
        .env("ATTACK_PAGE", format!("http://127.0.0.1:{attacker}/"))
        .output()
        .expect("running node tests/browser/cross_site.mjs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    println!("{stdout}");
    assert!(out.status.success(), "cross_site.mjs failed: {stdout}");
    let summary: Value = serde_json::from_str(stdout.trim().lines().last().unwrap_or(""))
        .expect("cross_site.mjs prints a JSON summary");

    // Every POST of the attacker's page that the server answered was refused. (Status 0
    // entries are the browser's own failures: an opaque answer it drops, a CORS error.)
    let requests = summary["requests"].as_array().expect("requests");
    let posts: Vec<&Value> = requests
        .iter()
        .filter(|r| r["phase"] == "attack" && r["method"] == "POST" && r["status"] != 0)
        .collect();
    for p in &posts {
        assert_eq!(p["status"], 403, "{p}");
    }
    // Three no-cors fetches and two forms reach the server (the JSON one stops at its
    // preflight, which gets no CORS answer).
    for path in ["/api/v1/keys", "/api/pull"] {
        assert!(
            posts
                .iter()
                .any(|p| p["url"].as_str().is_some_and(|u| u.ends_with(path))),
            "no POST to {path} reached the server: {summary}"
        );
    }
    assert!(posts.len() >= 5, "{summary}");
    let fetches = summary["fetches"].as_array().expect("fetches");
    let json = fetches
        .iter()
        .find(|f| f["name"] == "cors JSON key")
        .expect("the JSON fetch");
    assert!(
        json["error"].is_string(),
        "the preflighted fetch went through: {json}"
    );
    // The rebinding name is refused.
    assert_eq!(summary["rebound"], 403, "{summary}");
    // The server's own page still works by both names.
    let own = summary["own"].as_array().expect("own");
    assert_eq!(own.len(), 2, "{summary}");
    for o in own {
        assert_eq!(o["page"], 200, "{o}");
        assert!(o["session"].as_u64().is_some_and(|s| s < 300), "{o}");
        assert_eq!(o["show"], 200, "{o}");
    }
    // And nothing was made.
    assert_eq!(key_count(&s, ""), 0, "a cross-site request made a key");
    assert_eq!(job_count(&s, ""), 0, "a cross-site request started a pull");
}
