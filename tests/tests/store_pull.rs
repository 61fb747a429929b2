//! The model store against a local test hub (tests/src/hub.rs): pulls verified by sha256,
//! resumed with `Range` after the hub cuts a transfer, cancelled and failing jobs that leave
//! nothing behind, and the bad inputs (unknown references, 404, refused connections, files
//! that are not GGUF, truncated transfers, full disks, unsupported types, imports outside the
//! allowed roots, `..` in names).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};
use weft_core::dtype::GgmlType;
use weft_core::gguf::{write_gguf, TensorToWrite, Value};
use weft_core::test_support::model_path;
use weft_server::jobs::{JobKind, JobRunner, JobStatus, MemoryJobs, ProgressUnit};
use weft_server::store::{
    self, ImportRequest, PullPolicy, PullRequest, QuantizeRequest, Store, PARTIAL_DIR,
};
use weft_tests::hub::{Hub, HubFile};
use weft_tests::weft_binary;

fn sha256_file(p: &Path) -> String {
    let mut h = Sha256::new();
    let mut f = std::fs::File::open(p).unwrap();
    std::io::copy(&mut f, &mut h).unwrap();
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-store-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A store pulling from the test hub (on loopback: private destinations allowed).
fn store_at(dir: &Path, hub: &Hub) -> Store {
    Store::open(Some(dir))
        .unwrap()
        .with_hf_endpoint(&hub.base())
        .with_pull_policy(PullPolicy::allowing_private())
}

/// The `*.gguf` files of a store and whatever is left in its partial folder.
fn contents(dir: &Path) -> (Vec<String>, Vec<String>) {
    let list = |d: &Path, f: &dyn Fn(&str) -> bool| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| f(n))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    (
        list(dir, &|n| n.ends_with(".gguf")),
        list(&dir.join(PARTIAL_DIR), &|_| true),
    )
}

/// A small valid GGUF of about `mib` MiB (one F32 tensor).
fn synthetic_gguf(path: &Path, mib: usize) {
    let n = mib * (1 << 18);
    let data: Vec<u8> = (0..n)
        .flat_map(|i| ((i % 251) as f32 * 0.01).to_le_bytes())
        .collect();
    let dims = [256u64, (n / 256) as u64];
    let bytes = write_gguf(
        &[("general.architecture", Value::String("llama".into()))],
        &[TensorToWrite {
            name: "blk.0.ffn_up.weight",
            dims: &dims,
            ty: GgmlType::F32,
            data: &data,
        }],
        32,
    );
    std::fs::write(path, bytes).unwrap();
}

fn serve(hub: &Hub, repo: &str, name: &str, path: &Path) -> String {
    let sha = sha256_file(path);
    hub.add(
        repo,
        name,
        HubFile {
            path: path.to_path_buf(),
            sha256: sha.clone(),
            ..HubFile::default()
        },
    );
    sha
}

#[test]
fn a_cut_transfer_resumes_with_range_and_is_verified() {
    let Some(model) = model_path("qwen2") else {
        return;
    };
    let hub = Hub::start();
    let sha = sha256_file(&model);
    hub.add(
        "test/qwen-GGUF",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        HubFile {
            path: model.clone(),
            sha256: sha.clone(),
            cut_at: Some(0.4),
            cut_times: 1,
            ..HubFile::default()
        },
    );
    let dir = scratch("resume");
    let st = store_at(&dir, &hub);
    let req = PullRequest {
        reference: "hf.co/test/qwen-GGUF:q4_k_m".into(),
        name: Some("qwen".into()),
        sha256: None,
    };
    let mut last = 0;
    let got = store::pull(&st, &req, &mut |p| {
        last = p.done;
        true
    })
    .unwrap();
    assert!(got.verified, "the hub's X-Linked-Etag was not used");
    assert_eq!(got.sha256, sha);
    assert_eq!(got.resumed, 1);
    assert!(got.bytes > 100 << 20);
    assert_eq!(sha256_file(&dir.join("qwen.gguf")), sha);
    let log = hub.log();
    let size = std::fs::metadata(&model).unwrap().len();
    // The resumed request carries its Range through the hub's redirect to the bytes.
    let ranged: Vec<u64> = log
        .iter()
        .filter(|l| l.path.starts_with("/cdn/"))
        .filter_map(|l| {
            l.range
                .as_deref()?
                .strip_prefix("bytes=")?
                .trim_end_matches('-')
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(
        ranged.len(),
        1,
        "one ranged transfer expected; log: {log:?}"
    );
    let frac = ranged[0] as f64 / size as f64;
    assert!(
        (0.35..=0.45).contains(&frac),
        "resumed from {frac:.3} of the file"
    );
    assert!(log
        .iter()
        .any(|l| l.path.starts_with("/api/models/test/qwen-GGUF")));
    assert_eq!(contents(&dir), (vec!["qwen.gguf".to_string()], vec![]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn weft_pull_cli_brings_a_verified_model_into_the_store() {
    let Some(model) = model_path("qwen2") else {
        return;
    };
    let hub = Hub::start();
    let sha = serve(
        &hub,
        "test/qwen-GGUF",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        &model,
    );
    let dir = scratch("cli");
    let out = std::process::Command::new(weft_binary())
        .args([
            "pull",
            "hf.co/test/qwen-GGUF:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        ])
        .args([
            "--models-dir",
            dir.to_str().unwrap(),
            "--hf-endpoint",
            &hub.base(),
        ])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&sha) && text.contains("verified"), "{text}");
    // Not a terminal: plain progress lines.
    assert!(text.contains("weft: downloading:"), "{text}");
    let list = std::process::Command::new(weft_binary())
        .args(["list", "--models-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.contains("qwen2.5-coder-0.5b-instruct-q4_k_m:latest"),
        "{list}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn wrong_sha256_fails_and_leaves_nothing() {
    let hub = Hub::start();
    let dir = scratch("sha");
    let file = dir.join("src.bin");
    synthetic_gguf(&file, 2);
    serve(&hub, "t/r", "m.gguf", &file);
    let st_dir = dir.join("store");
    let st = store_at(&st_dir, &hub);
    let wrong = "0".repeat(64);
    let req = PullRequest {
        reference: "hf.co/t/r:m.gguf".into(),
        name: None,
        sha256: Some(wrong.clone()),
    };
    let e = store::pull(&st, &req, &mut |_| true).unwrap_err();
    assert!(
        e.message.contains("sha256 mismatch") && e.message.contains(&wrong),
        "{}",
        e.message
    );
    assert_eq!(contents(&st_dir), (vec![], vec![]));
    // A hub announcing the wrong digest is caught the same way.
    hub.add(
        "t/r",
        "lying.gguf",
        HubFile {
            path: file.clone(),
            sha256: "ab".repeat(32),
            ..HubFile::default()
        },
    );
    let req = PullRequest {
        reference: "hf.co/t/r:lying.gguf".into(),
        name: None,
        sha256: None,
    };
    let e = store::pull(&st, &req, &mut |_| true).unwrap_err();
    assert!(e.message.contains("sha256 mismatch"), "{}", e.message);
    assert_eq!(contents(&st_dir), (vec![], vec![]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cancel_mid_transfer_leaves_nothing() {
    let hub = Hub::start();
    let dir = scratch("cancel");
    let file = dir.join("src.bin");
    synthetic_gguf(&file, 8);
    let sha = sha256_file(&file);
    hub.add(
        "t/r",
        "slow.gguf",
        HubFile {
            path: file,
            sha256: sha,
            delay: Some(Duration::from_millis(60)),
            ..HubFile::default()
        },
    );
    let st_dir = dir.join("store");
    let st = store_at(&st_dir, &hub);
    let runner = JobRunner::new(Arc::new(MemoryJobs::new(16)), 2);
    let req = PullRequest {
        reference: "hf.co/t/r:slow.gguf".into(),
        name: None,
        sha256: None,
    };
    let job = runner.submit(
        JobKind::Pull,
        json!({"model": req.reference}),
        ProgressUnit::Bytes,
        Box::new(move |ctx| {
            store::pull(&st, &req, &mut |p| {
                ctx.progress(p.done, p.total);
                !ctx.cancelled()
            })
            .map(|p| json!(p))
            .map_err(|e| e.message)
        }),
    );
    let mut j = runner.get(&job.id).unwrap();
    while j.progress.done == 0 && !j.status.is_final() {
        j = runner
            .wait_change(&job.id, j.version, Duration::from_secs(30))
            .unwrap();
    }
    assert!(
        j.progress.total > 0 && j.progress.done < j.progress.total,
        "{j:?}"
    );
    runner.cancel(&job.id);
    let j = runner.wait(&job.id, Duration::from_secs(30)).unwrap();
    assert_eq!(j.status, JobStatus::Cancelled, "{j:?}");
    assert_eq!(contents(&st_dir), (vec![], vec![]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_pulls_fail_with_clear_messages() {
    let hub = Hub::start();
    let dir = scratch("bad");
    let text = dir.join("notes.txt");
    std::fs::write(&text, "not a model at all\n".repeat(1000)).unwrap();
    serve(&hub, "t/r", "notes.gguf", &text);
    let small = dir.join("small.bin");
    synthetic_gguf(&small, 2);
    let sha = sha256_file(&small);
    hub.add(
        "t/r",
        "cut.gguf",
        HubFile {
            path: small.clone(),
            sha256: sha,
            cut_at: Some(0.5),
            cut_times: 1000,
            ..HubFile::default()
        },
    );
    let st_dir = dir.join("store");
    let st = store_at(&st_dir, &hub);
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let cases: Vec<(String, Option<&str>, &str, bool)> = vec![
        (
            "ftp://example.test/x.gguf".into(),
            None,
            "unknown model reference",
            true,
        ),
        (
            "hf.co/t/missing:m.gguf".into(),
            None,
            "not found (404)",
            true,
        ),
        (
            "hf.co/t/r:q3_k_xl".into(),
            None,
            "no .gguf file matching",
            true,
        ),
        (
            format!("http://127.0.0.1:{refused}/m.gguf"),
            None,
            "could not be reached",
            false,
        ),
        (
            "hf.co/t/r:notes.gguf".into(),
            None,
            "is not a usable GGUF file",
            false,
        ),
        (
            "hf.co/t/r:cut.gguf".into(),
            None,
            "kept stopping early",
            false,
        ),
        (
            "hf.co/t/r:notes.gguf".into(),
            Some("../escape"),
            "may not start with '.' or contain '..'",
            true,
        ),
        (
            "hf.co/t/r:notes.gguf".into(),
            Some("a/b"),
            "is not allowed",
            true,
        ),
    ];
    for (reference, name, want, client) in cases {
        let req = PullRequest {
            reference: reference.clone(),
            name: name.map(str::to_string),
            sha256: None,
        };
        let e = store::pull(&st, &req, &mut |_| true).unwrap_err();
        assert!(e.message.contains(want), "{reference}: {}", e.message);
        assert_eq!(e.client_fault, client, "{reference}: {}", e.message);
        assert_eq!(
            contents(&st_dir),
            (vec![], vec![]),
            "{reference} left files"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_disk_fails_the_pull_and_leaves_nothing() {
    // A 4 MiB tmpfs in a private mount namespace stands in for a full disk.
    if std::process::Command::new("unshare")
        .args(["-Urm", "true"])
        .status()
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "unshare -Urm is needed for the full-disk test"
        );
        eprintln!("\n*** SKIPPING: unshare -Urm is not available ***\n");
        return;
    }
    let hub = Hub::start();
    let dir = scratch("full");
    let file = dir.join("src.bin");
    synthetic_gguf(&file, 8);
    serve(&hub, "t/r", "big.gguf", &file);
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=4m tmpfs {m} && {w} pull hf.co/t/r:big.gguf --models-dir {m}/models --hf-endpoint {h}; echo \"exit=$?\"; echo left:; ls -A {m}/models {m}/models/.weft-partial",
        m = mnt.display(),
        w = weft_binary().display(),
        h = hub.base()
    );
    let out = std::process::Command::new("unshare")
        .args(["-Urm", "sh", "-c", &script])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("weft: error:") && text.contains("no space left on the device"),
        "{text}"
    );
    assert!(text.contains("exit=1"), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let left = stdout.split("left:").nth(1).unwrap_or("");
    assert!(
        !left.contains(".gguf") && !left.contains("pull-"),
        "files left: {text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn imports_stay_inside_the_allowed_roots() {
    let dir = scratch("import");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let model = outside.join("m.gguf");
    synthetic_gguf(&model, 1);
    let st_dir = dir.join("store");
    let st = Store::open(Some(&st_dir)).unwrap();
    let roots = st.import_roots.clone();
    let req = |p: &Path, name: Option<&str>| ImportRequest {
        path: p.to_path_buf(),
        name: name.map(str::to_string),
    };
    let e = store::import(&st, &req(&model, None), Some(&roots), &mut |_, _, _| true).unwrap_err();
    assert!(
        e.message.contains("outside the allowed import roots"),
        "{}",
        e.message
    );
    // A symlink inside the store pointing out of it is refused the same way.
    std::os::unix::fs::symlink(&model, st_dir.join("link.bin")).unwrap();
    let e = store::import(
        &st,
        &req(&st_dir.join("link.bin"), None),
        Some(&roots),
        &mut |_, _, _| true,
    )
    .unwrap_err();
    assert!(
        e.message.contains("outside the allowed import roots"),
        "{}",
        e.message
    );
    let dotted = st_dir
        .join("sub")
        .join("..")
        .join("..")
        .join("outside")
        .join("m.gguf");
    std::fs::create_dir_all(st_dir.join("sub")).unwrap();
    let e = store::import(&st, &req(&dotted, None), Some(&roots), &mut |_, _, _| true).unwrap_err();
    assert!(
        e.message.contains("outside the allowed import roots"),
        "{}",
        e.message
    );
    std::fs::remove_file(st_dir.join("link.bin")).unwrap();
    // With the folder as a root it is imported (hard-linked on the same file system).
    let st = st
        .with_import_roots(std::slice::from_ref(&outside))
        .unwrap();
    let roots = st.import_roots.clone();
    let e = store::import(
        &st,
        &req(&model, Some("../x")),
        Some(&roots),
        &mut |_, _, _| true,
    )
    .unwrap_err();
    assert!(e.message.contains("'..'"), "{}", e.message);
    let got = store::import(
        &st,
        &req(&model, Some("mine:v1")),
        Some(&roots),
        &mut |_, _, _| true,
    )
    .unwrap();
    assert_eq!(got.name, "mine:v1");
    assert_eq!(got.how, "linked");
    let c = st.catalog().unwrap();
    assert!(c.resolve("mine:v1").is_ok(), "{:?}", c.names());
    // Not a GGUF: refused before anything is written.
    let junk = outside.join("junk.gguf");
    std::fs::write(&junk, b"junk").unwrap();
    let e = store::import(&st, &req(&junk, None), Some(&roots), &mut |_, _, _| true).unwrap_err();
    assert!(e.message.contains("not a usable GGUF"), "{}", e.message);
    assert_eq!(contents(&st_dir).0, vec!["mine-v1.gguf".to_string()]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn quantize_refuses_bad_types_and_silent_requantization() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let dir = scratch("quant");
    let st = Store::open(Some(&dir)).unwrap();
    let req = |ty: &str, allow: bool| QuantizeRequest {
        source: model.display().to_string(),
        target: Some("out".into()),
        r#type: ty.into(),
        allow_requantize: allow,
        pure: false,
        threads: Some(2),
    };
    let e = store::quantize_in_store(&st, &req("Q3_K_XL", false), true, &mut |_| true).unwrap_err();
    assert!(
        e.client_fault && e.message.contains("unsupported quantization type"),
        "{}",
        e.message
    );
    let e = store::quantize_in_store(&st, &req("q8_0", false), true, &mut |_| true).unwrap_err();
    assert!(
        e.client_fault && e.message.contains("allow_requantize"),
        "{}",
        e.message
    );
    // Cancelled part way: nothing left.
    let mut calls = 0;
    let e = store::quantize_in_store(&st, &req("q8_0", true), true, &mut |_| {
        calls += 1;
        calls < 5
    })
    .unwrap_err();
    assert_eq!(e.message, "cancelled");
    assert_eq!(contents(&dir), (vec![], vec![]));
    let got = store::quantize_in_store(&st, &req("Q8_0", true), true, &mut |_| true).unwrap();
    assert_eq!(got.name.as_deref(), Some("out"));
    let f = weft_core::gguf::ModelFile::open(dir.join("out.gguf")).unwrap();
    assert_eq!(f.gguf.get_u64("general.file_type"), Some(7));
    assert_eq!(
        f.gguf.tensor("blk.0.attn_q.weight").unwrap().ty,
        GgmlType::Q8_0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_store_refuses_loopback_unless_allowed() {
    let hub = Hub::start();
    let dir = scratch("strict");
    let small = dir.join("s.bin");
    synthetic_gguf(&small, 1);
    serve(&hub, "t/r", "s.gguf", &small);
    let st_dir = dir.join("store");
    // The default policy: the hub on 127.0.0.1 is not reached at all.
    let st = Store::open(Some(&st_dir))
        .unwrap()
        .with_hf_endpoint(&hub.base());
    let req = PullRequest {
        reference: "hf.co/t/r:s.gguf".into(),
        ..PullRequest::default()
    };
    let e = store::pull(&st, &req, &mut |_| true).unwrap_err();
    assert!(e.message.contains("could not be reached"), "{}", e.message);
    assert!(hub.log().is_empty(), "the hub was reached");
    assert_eq!(contents(&st_dir), (vec![], vec![]));
    // Allowed by name, it is.
    let mut policy = PullPolicy::strict();
    policy.allow_hosts.push("127.0.0.1".into());
    let st = st.with_pull_policy(policy);
    store::pull(&st, &req, &mut |_| true).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
