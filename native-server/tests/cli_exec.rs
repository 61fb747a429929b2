//! `weft exec` run as a process: a script that reads and writes files in its workspace (the
//! current directory) and prints; the same script under `--memory 64` fails cleanly.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A script that needs about 200 MB: it reads its input, builds a large table, writes a
/// summary file and prints.
const SCRIPT: &str = "import json
rows = open('input.txt').read().split()
table = [bytearray(1 << 20) for _ in range(200)]
json.dump({'rows': len(rows), 'mib': len(table)}, open('summary.json', 'w'))
print('rows', len(rows), 'table', len(table))
";

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-cli-exec-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn weft_exec(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .arg("exec")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run weft")
}

#[test]
fn exec_runs_a_script_in_the_current_directory() {
    if !weft_sandbox::test_support::runtimes_present("exec_runs_a_script_in_the_current_directory")
    {
        return;
    }
    let dir = scratch("ok");
    std::fs::write(dir.join("input.txt"), "a b c\nd\n").unwrap();
    std::fs::write(dir.join("job.py"), SCRIPT).unwrap();
    let out = weft_exec(&dir, &["job.py"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "rows 4 table 200\n");
    let summary = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert_eq!(summary, "{\"rows\": 4, \"mib\": 200}");

    // Arguments after `--`, and a JavaScript file.
    std::fs::write(dir.join("args.js"), "print(scriptArgs.slice(1).join('|'));").unwrap();
    let out = weft_exec(&dir, &["args.js", "--", "x", "y z"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "x|y z\n");

    // A script's own failure passes its status through.
    std::fs::write(dir.join("fail.py"), "import sys\nsys.exit(7)\n").unwrap();
    assert_eq!(weft_exec(&dir, &["fail.py"]).status.code(), Some(7));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn exec_under_a_small_memory_limit_fails_cleanly() {
    if !weft_sandbox::test_support::runtimes_present(
        "exec_under_a_small_memory_limit_fails_cleanly",
    ) {
        return;
    }
    let dir = scratch("mem");
    std::fs::write(dir.join("input.txt"), "a b c\nd\n").unwrap();
    std::fs::write(dir.join("job.py"), SCRIPT).unwrap();
    let out = weft_exec(&dir, &["--memory", "64", "job.py"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("MemoryError"), "{stderr}");
    assert!(
        stderr
            .lines()
            .last()
            .unwrap()
            .starts_with("weft: error: memory limit of 64 MiB reached"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!dir.join("summary.json").exists());

    // Bad input: one line each.
    for (args, needle) in [
        (vec!["job.txt"], "cannot tell the language"),
        (vec!["missing.py"], "missing.py"),
        (vec!["--memory", "0", "job.py"], "memory must be between"),
    ] {
        let out = weft_exec(&dir, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("weft: error: ") && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
