//! The Kubernetes manifests in deploy/ validate against the Kubernetes API schemas, strictly
//! (no unknown fields), with `kubernetes-validate` from PyPI (pinned in
//! scripts/requirements-test.txt; it bundles the schemas and runs offline). A copy with a
//! deliberate mistake must fail, so the check is known to bite.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// `kubernetes-validate --strict FILES`, or None (after a loud message) when it is not
/// installed outside CI.
fn validate(files: &[PathBuf]) -> Option<Output> {
    let ok = Command::new("python3")
        .args(["-c", "import kubernetes_validate"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("kubernetes-validate is missing; CI installs scripts/requirements-test.txt");
        }
        eprintln!("\n*** SKIPPING: kubernetes-validate missing (pip install -r scripts/requirements-test.txt) ***\n");
        return None;
    }
    Some(
        Command::new("python3")
            .args(["-m", "kubernetes_validate", "--strict", "--no-warn"])
            .args(files)
            .output()
            .expect("running kubernetes-validate"),
    )
}

fn manifests() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(deploy_dir())
        .expect("deploy/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    v
}

#[test]
fn manifests_validate() {
    let files = manifests();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in ["postgres.yaml", "secret.yaml", "weft.yaml"] {
        assert!(names.iter().any(|n| n == want), "deploy/{want} missing");
    }
    let Some(out) = validate(&files) else {
        return;
    };
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "invalid manifests:\n{text}");
    for kind in [
        "deployment/weft",
        "service/weft",
        "statefulset/weft-postgres",
        "secret/weft-secrets",
    ] {
        assert!(text.contains(kind), "{kind} was not validated:\n{text}");
    }
}

#[test]
fn a_broken_manifest_fails() {
    let src = std::fs::read_to_string(deploy_dir().join("weft.yaml")).unwrap();
    let broken = src.replacen("readinessProbe:", "readinesProbe:", 1);
    assert_ne!(src, broken);
    let path = std::env::temp_dir().join(format!("weft-broken-{}.yaml", std::process::id()));
    std::fs::write(&path, broken).unwrap();
    let out = validate(std::slice::from_ref(&path));
    let _ = std::fs::remove_file(&path);
    let Some(out) = out else {
        return;
    };
    assert!(!out.status.success(), "a misspelt field passed validation");
    assert!(String::from_utf8_lossy(&out.stdout).contains("readinesProbe"));
}
