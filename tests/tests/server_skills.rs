//! Skills and artifacts through `weft serve`: discovery in --skills-dir, zip install over
//! multipart `POST /api/skills`, get, delete, a `../` entry refused with nothing written, 404s,
//! the `/v1/skills` list shape, `/api/models`' skills field, and artifact downloads refusing
//! unknown runs (404) and traversal (400).

use std::io::Write;
use std::path::{Path, PathBuf};

use weft_core::test_support::model_path;
use weft_tests::{send, Response, Server};

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-skills-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn zip_of(entries: &[(&str, &str)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, body) in entries {
        w.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(body.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// `POST /api/skills` with the zip as the `file` field (and `overwrite` when given).
fn upload(s: &Server, zip: &[u8], overwrite: Option<&str>) -> Response {
    let boundary = "weftboundary7f3a";
    let mut body = Vec::new();
    if let Some(o) = overwrite {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"overwrite\"\r\n\r\n{o}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"s.zip\"\r\nContent-Type: application/zip\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(zip);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let ct = format!("multipart/form-data; boundary={boundary}");
    let mut c = s.connect().unwrap();
    send(
        &mut c,
        "POST",
        "/api/skills",
        Some(&body),
        &[("Content-Type", &ct)],
    )
    .unwrap();
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut c, &mut raw).unwrap();
    Response::parse(&raw)
}

fn skill_md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nDo the thing.\n")
}

fn ids(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

fn tree(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(d) {
        for e in rd.flatten() {
            out.push(e.path());
            if e.path().is_dir() {
                out.extend(tree(&e.path()));
            }
        }
    }
    out
}

#[test]
fn skills_and_artifacts_over_http() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let home = scratch("home");
    let dir = scratch("dir");
    std::fs::create_dir_all(dir.join("greet/scripts")).unwrap();
    std::fs::write(
        dir.join("greet/SKILL.md"),
        skill_md("greet", "Greets people politely."),
    )
    .unwrap();
    std::fs::write(dir.join("greet/scripts/hello.py"), "print('hello')\n").unwrap();
    let args = vec![
        "--model".to_string(),
        model.display().to_string(),
        "--skills-dir".to_string(),
        dir.display().to_string(),
    ];
    let s = Server::start_env(&args, &[("WEFT_HOME", &home)]);

    // Discovered from --skills-dir.
    let r = s.request("GET", "/api/skills", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let l = r.json();
    assert_eq!(l["enabled"], true);
    assert_eq!(l["installable"], true);
    assert_eq!(ids(&l["skills"]), ["greet"]);
    let g = &l["skills"][0];
    assert_eq!(g["object"], "skill");
    assert_eq!(g["origin"], "discovered");
    assert_eq!(g["description"], "Greets people politely.");
    assert!(g.get("instructions").is_none(), "{g}");
    assert!(
        g["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["path"] == "scripts/hello.py" && f["kind"] == "script"),
        "{g}"
    );

    // Install a zip (SKILL.md inside its folder).
    let zip = zip_of(&[
        ("notes/SKILL.md", &skill_md("notes", "Takes notes.")),
        ("notes/references/style.md", "Be brief.\n"),
    ]);
    let r = upload(&s, &zip, None);
    assert_eq!(r.status, 200, "{}", r.body);
    let n = r.json();
    assert_eq!(n["id"], "notes");
    assert_eq!(n["origin"], "installed");
    assert!(home.join("skills/notes/SKILL.md").is_file());
    // The same name again: 409 without overwrite, 200 with it.
    let r = upload(&s, &zip, None);
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.json()["error"].is_string());
    let r = upload(&s, &zip, Some("true"));
    assert_eq!(r.status, 200, "{}", r.body);

    // One skill, with its instructions, on both surfaces.
    let r = s.request("GET", "/api/skills/notes", None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["instructions"]
        .as_str()
        .unwrap()
        .contains("Do the thing."));
    let r = s.request("GET", "/v1/skills/notes", None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["object"], "skill");

    // The /v1 list.
    let r = s.request("GET", "/v1/skills", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["object"], "list");
    let mut got = ids(&v["data"]);
    got.sort();
    assert_eq!(got, ["greet", "notes"]);

    // /api/models says skills are on.
    let r = s.request("GET", "/api/models", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let sk = &r.json()["skills"];
    assert_eq!(sk["enabled"], true);
    assert_eq!(sk["count"], 2);

    // Delete: the installed one goes, the discovered one is read-only, unknown is 404.
    let r = s.request("DELETE", "/api/skills/notes", None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["removed"], true);
    assert!(!home.join("skills/notes").exists());
    let r = s.request("DELETE", "/api/skills/greet", None);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(dir.join("greet/SKILL.md").is_file());
    for path in ["/api/skills/nope", "/api/skills/notes"] {
        let r = s.request("GET", path, None);
        assert_eq!(r.status, 404, "{path}: {}", r.body);
        assert!(r.json()["error"].is_string());
    }
    let r = s.request("GET", "/v1/skills/nope", None);
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.json()["error"]["message"].is_string(), "{}", r.body);
    let r = s.request("DELETE", "/api/skills/nope", None);
    assert_eq!(r.status, 404, "{}", r.body);

    // A `../` entry: refused, nothing written anywhere.
    let before = tree(&home);
    let evil = zip_of(&[
        ("evil/SKILL.md", &skill_md("evil", "Escapes.")),
        ("evil/../../escaped.txt", "gotcha\n"),
    ]);
    let r = upload(&s, &evil, None);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.json()["error"].as_str().unwrap().contains("refused"),
        "{}",
        r.body
    );
    assert_eq!(tree(&home), before);
    assert!(!home.join("escaped.txt").exists());
    assert!(!std::env::temp_dir().join("escaped.txt").exists());

    // Not a form, or a form without the file: 400.
    let r = s.request("POST", "/api/skills", Some("{}"));
    assert_eq!(r.status, 400, "{}", r.body);
    let r = upload(&s, b"not a zip", None);
    assert_eq!(r.status, 400, "{}", r.body);

    // Artifacts: unknown runs are 404, paths out of the run 400.
    let run = "0123456789abcdef0123456789abcdef";
    let r = s.request("GET", &format!("/api/code/artifacts/{run}/a.csv"), None);
    assert_eq!(r.status, 404, "{}", r.body);
    let r = s.request("GET", "/api/code/artifacts/not-a-run/a.csv", None);
    assert_eq!(r.status, 404, "{}", r.body);
    for p in ["../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd", "a/../../b"] {
        let r = s.request("GET", &format!("/api/code/artifacts/{run}/{p}"), None);
        assert_eq!(r.status, 400, "{p}: {}", r.body);
        assert!(r.json()["error"].is_string());
    }

    drop(s);
    let _ = std::fs::remove_dir_all(&home);
    let _ = std::fs::remove_dir_all(&dir);
}
