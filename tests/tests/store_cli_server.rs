//! The store commands through a running server: with `WEFT_HOST` naming a `weft serve`,
//! `weft pull` runs as the server's job (seen in its job list), `weft list`, `cp`, `show` and
//! `rm` change and read the server's registry; with `--local` or `--models-dir` the same
//! commands work on the files, and a named server that does not answer is an error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};
use weft_core::test_support::model_path;
use weft_tests::hub::{Hub, HubFile};
use weft_tests::{weft_binary, Server};

fn sha256_file(p: &Path) -> String {
    let mut h = Sha256::new();
    std::io::copy(&mut std::fs::File::open(p).unwrap(), &mut h).unwrap();
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-cli-server-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `weft ARGS` with only the environment given (no WEFT_HOST or key from the caller's).
fn weft(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(weft_binary())
        .env_remove("WEFT_HOST")
        .env_remove("WEFT_API_KEY")
        .env("WEFT_HOME", home)
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("running weft")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "weft failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn tags(s: &Server) -> Vec<String> {
    s.request("GET", "/api/tags", None).json()["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn store_commands_go_through_a_running_server() {
    let Some(small) = model_path("smollm2") else {
        return;
    };
    let hub = Hub::start();
    hub.add(
        "test/smol-GGUF",
        "smol.gguf",
        HubFile {
            path: small.clone(),
            sha256: sha256_file(&small),
            ..HubFile::default()
        },
    );
    let dir = scratch("remote");
    let (server_home, cli_home) = (dir.join("server-home"), dir.join("cli-home"));
    let store = dir.join("store");
    std::fs::create_dir_all(&store).unwrap();
    // A model to serve, so the server gets ready.
    std::os::unix::fs::symlink(&small, store.join("base.gguf")).unwrap();
    let s = Server::start_env(
        &[
            "--models-dir".into(),
            store.display().to_string(),
            "--hf-endpoint".into(),
            hub.base(),
            // The test hub is on loopback, which pulls may not reach by default.
            "--pull-allow-private".into(),
            "--ctx".into(),
            "512".into(),
            "--parallel".into(),
            "1".into(),
        ],
        &[("WEFT_HOME", server_home.as_path())],
    );
    let base = s.base();
    let via = [("WEFT_HOST", base.as_str())];

    let out = ok(&weft(
        &cli_home,
        &via,
        &[
            "pull",
            "hf.co/test/smol-GGUF:smol.gguf",
            "--name",
            "viaserver",
        ],
    ));
    assert!(out.contains("pulled 'viaserver'"), "{out}");
    assert!(out.contains("verified"), "{out}");
    // The server ran it, into its store; nothing went into the CLI's own store.
    let jobs = s.request("GET", "/api/v1/jobs", None).json();
    let pulls: Vec<&Value> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["kind"] == "pull" && j["request"]["name"] == "viaserver")
        .collect();
    assert_eq!(pulls.len(), 1, "{jobs}");
    assert_eq!(pulls[0]["status"], "succeeded", "{jobs}");
    assert!(store.join("viaserver.gguf").exists());
    assert!(!cli_home.join("models/viaserver.gguf").exists());

    let out = ok(&weft(&cli_home, &via, &["cp", "viaserver", "alias"]));
    assert!(out.contains("copied"), "{out}");
    assert!(
        tags(&s).contains(&"alias:latest".to_string()),
        "{:?}",
        tags(&s)
    );
    let out = ok(&weft(&cli_home, &via, &["list"]));
    assert!(out.contains("viaserver:latest"), "{out}");
    assert!(out.contains("alias:latest"), "{out}");
    let out = ok(&weft(&cli_home, &via, &["show", "viaserver"]));
    assert!(out.contains("llama"), "{out}");
    let out = ok(&weft(&cli_home, &via, &["rm", "alias"]));
    assert!(out.contains("deleted 'alias'"), "{out}");
    assert!(
        !tags(&s).contains(&"alias:latest".to_string()),
        "{:?}",
        tags(&s)
    );

    // The server's message for bad input, as the command's error.
    let o = weft(&cli_home, &via, &["rm", "no-such-model"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no-such-model"), "{err}");

    // --models-dir and --local work on the files even though the server runs.
    let store_arg = store.display().to_string();
    let out = ok(&weft(
        &cli_home,
        &via,
        &["list", "--models-dir", &store_arg],
    ));
    assert!(out.contains("viaserver:latest"), "{out}");
    let out = ok(&weft(&cli_home, &via, &["list", "--local"]));
    assert!(
        !out.contains("viaserver"),
        "the CLI's own store is empty: {out}"
    );

    // A named server that does not answer is an error, not a silent switch to the files.
    let port = base.rsplit(':').next().unwrap().to_string();
    drop(s);
    let dead = format!("http://127.0.0.1:{port}");
    let o = weft(&cli_home, &[("WEFT_HOST", dead.as_str())], &["list"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no server answers") && err.contains("--local"),
        "{err}"
    );
    // Without a server the files are used: a direct pull into the CLI's store.
    let out = ok(&weft(
        &cli_home,
        &[("WEFT_HF_ENDPOINT", hub.base().as_str())],
        &["pull", "hf.co/test/smol-GGUF:smol.gguf", "--local"],
    ));
    assert!(out.contains("pulled 'smol'"), "{out}");
    assert!(cli_home.join("models/smol.gguf").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
