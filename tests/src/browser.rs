//! What the Chromium tests need, checked in one place: node, Debian's chromium,
//! playwright-core (`npm ci` in tests/browser) and, for the browser package's own tests, the
//! built package (web/pkg). Under CI a missing one fails the test; elsewhere the test is
//! skipped with a loud line.

use std::path::PathBuf;
use std::process::Command;

/// The repository's root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The first missing prerequisite, if any; `package`: the built browser package is needed too.
pub fn missing(package: bool) -> Option<String> {
    let root = repo_root();
    let node_ok = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !node_ok {
        return Some("node".into());
    }
    let mut needed = vec![
        (
            "chromium (apt-get install chromium)",
            PathBuf::from("/usr/bin/chromium"),
        ),
        (
            "playwright-core (npm ci in tests/browser)",
            root.join("tests/browser/node_modules/playwright-core"),
        ),
    ];
    if package {
        needed.push((
            "the browser package (scripts/build-web.sh)",
            root.join("web/pkg/weft_wasm_bg.wasm"),
        ));
    }
    needed
        .into_iter()
        .find(|(_, p)| !p.exists())
        .map(|(what, p)| format!("{what}: {}", p.display()))
}

/// Whether `test` can run here (see [`missing`]): under CI a missing prerequisite panics,
/// elsewhere it prints a SKIPPING line and returns false.
pub fn ready(test: &str, package: bool) -> bool {
    let Some(m) = missing(package) else {
        return true;
    };
    if std::env::var_os("CI").is_some() {
        panic!("{test}: prerequisite missing under CI: {m}");
    }
    eprintln!("\n*** SKIPPING {test}: missing {m} ***\n");
    false
}
