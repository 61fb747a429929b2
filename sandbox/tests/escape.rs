//! Escape and abuse: each test asserts containment (nothing outside the workspace was read or
//! written, the host is unharmed) and a clear error.

mod common;

use std::time::Duration;

use weft_sandbox::{Error, Language, Limits, Stop, Workspace};

/// A file beside the workspace (in its parent directory) that the guest must not reach.
fn neighbour(ws: &Workspace, name: &str) -> std::path::PathBuf {
    ws.path().parent().unwrap().join(name)
}

#[test]
fn reading_etc_passwd_fails() {
    let Some(sb) = common::sandbox("reading_etc_passwd_fails") else {
        return;
    };
    let (out, _ws) = common::py(&sb, "print(open('/etc/passwd').read())\n");
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    assert!(!out.stdout.contains("root:"), "{out:?}");
    assert!(
        out.stderr.contains("FileNotFoundError") || out.stderr.contains("PermissionError"),
        "{}",
        out.stderr
    );
    let ws = Workspace::temporary().unwrap();
    let out = common::run_in(
        &sb,
        &ws,
        Language::Javascript,
        "const f = std.open('/etc/passwd', 'r'); print(f === null ? 'null' : f.readAsString());",
        common::small_limits(),
    );
    assert_eq!(out.stdout, "null\n", "{out:?}");
    // The host-side file tool refuses it before touching the disk.
    let e = ws.read("/etc/passwd").unwrap_err();
    assert!(matches!(e, Error::Path { .. }), "{e}");
    assert!(e.to_string().contains("absolute"), "{e}");
}

#[test]
fn parent_and_absolute_paths_stay_inside() {
    let Some(sb) = common::sandbox("parent_and_absolute_paths_stay_inside") else {
        return;
    };
    let ws = Workspace::temporary().unwrap();
    let secret = neighbour(&ws, &format!("weft-secret-{}", std::process::id()));
    std::fs::write(&secret, "top secret").unwrap();
    let name = secret.file_name().unwrap().to_str().unwrap().to_string();
    let code = format!(
        "import os\nfor p in ['../{name}', '/workspace/../{name}', '{}', '/{name}']:\n    try:\n        print('READ', open(p).read())\n    except OSError as e:\n        print('refused', type(e).__name__)\ntry:\n    print(sorted(os.listdir('/')))\nexcept OSError as e:\n    print('no root:', type(e).__name__)\n",
        secret.display()
    );
    let out = common::run_in(&sb, &ws, Language::Python, &code, common::small_limits());
    std::fs::remove_file(&secret).unwrap();
    assert!(out.success(), "{out:?}");
    assert!(!out.stdout.contains("READ"), "{}", out.stdout);
    assert_eq!(out.stdout.matches("refused").count(), 4, "{}", out.stdout);
    let root_listing = out.stdout.lines().last().unwrap();
    for host_dir in ["'etc'", "'root'", "'proc'", "'home'", "'tmp'"] {
        assert!(!root_listing.contains(host_dir), "{root_listing}");
    }
    // Host side: `..`, absolute paths and a symlink made to point outside.
    for bad in ["../x", "a/../../x", "/etc/passwd", "/workspace/../x"] {
        let e = ws.read(bad).unwrap_err();
        assert!(matches!(e, Error::Path { .. }), "{bad}: {e}");
        let e = ws.write(bad, b"x").unwrap_err();
        assert!(matches!(e, Error::Path { .. }), "{bad}: {e}");
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("/etc/passwd", ws.path().join("link")).unwrap();
        let e = ws.read("link").unwrap_err();
        assert!(matches!(e, Error::Path { .. }), "{e}");
        assert!(e.to_string().contains("outside the workspace"), "{e}");
        let e = ws.write("link", b"owned").unwrap_err();
        assert!(matches!(e, Error::Path { .. }), "{e}");
        // And from inside the guest.
        let out = common::run_in(
            &sb,
            &ws,
            Language::Python,
            "try:\n    print('READ', open('link').read())\nexcept OSError as e:\n    print('refused', type(e).__name__)\n",
            common::small_limits(),
        );
        assert_eq!(
            out.stdout.trim_end().split(' ').next(),
            Some("refused"),
            "{out:?}"
        );
    }
}

#[test]
fn writing_outside_the_workspace_fails() {
    let Some(sb) = common::sandbox("writing_outside_the_workspace_fails") else {
        return;
    };
    let ws = Workspace::temporary().unwrap();
    let target = neighbour(&ws, &format!("weft-evil-{}", std::process::id()));
    let name = target.file_name().unwrap().to_str().unwrap().to_string();
    let code = format!(
        "import os\nfor p in ['../{name}', '{}', '/tmp/{name}', '/{name}']:\n    try:\n        open(p, 'w').write('x')\n        print('WROTE', p)\n    except OSError as e:\n        print('refused', type(e).__name__)\ntry:\n    os.symlink('/etc', 'etc-link')\n    open('etc-link/evil', 'w').write('x')\n    print('WROTE through link')\nexcept OSError as e:\n    print('refused', type(e).__name__)\n",
        target.display()
    );
    let out = common::run_in(&sb, &ws, Language::Python, &code, common::small_limits());
    assert!(out.success(), "{out:?}");
    assert!(!out.stdout.contains("WROTE"), "{}", out.stdout);
    assert_eq!(out.stdout.matches("refused").count(), 5, "{}", out.stdout);
    assert!(!target.exists());
    assert!(!std::path::Path::new(&format!("/tmp/{name}")).exists());
    assert!(!std::path::Path::new("/etc/evil").exists());
}

#[test]
fn sockets_are_not_supported() {
    let Some(sb) = common::sandbox("sockets_are_not_supported") else {
        return;
    };
    let (out, _ws) = common::py(
        &sb,
        "import socket\ntry:\n    s = socket.create_connection(('127.0.0.1', 22), timeout=2)\n    print('CONNECTED')\nexcept Exception as e:\n    print('refused', type(e).__name__, e)\ns = socket.socket()\ns.connect(('127.0.0.1', 22))\nprint('CONNECTED')\n",
    );
    assert!(!out.stdout.contains("CONNECTED"), "{out:?}");
    assert!(out.stdout.starts_with("refused"), "{out:?}");
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    assert!(out.stderr.contains("OSError"), "{}", out.stderr);
    assert!(
        out.stderr.to_lowercase().contains("not supported"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_infinite_loop_stops_at_the_cpu_limit() {
    let Some(sb) = common::sandbox("an_infinite_loop_stops_at_the_cpu_limit") else {
        return;
    };
    let (out, _ws) = common::py(&sb, "while True: pass\n");
    assert_eq!(out.stopped, Some(Stop::CpuLimit), "{out:?}");
    assert_eq!(out.exit_code, None);
    assert!(
        out.error.as_deref().unwrap().contains("CPU limit"),
        "{out:?}"
    );
    assert!(out.fuel_used >= common::small_limits().fuel, "{out:?}");
    let ws = Workspace::temporary().unwrap();
    let out = common::run_in(
        &sb,
        &ws,
        Language::Javascript,
        "for (;;) {}",
        common::small_limits(),
    );
    assert_eq!(out.stopped, Some(Stop::CpuLimit), "{out:?}");
}

#[test]
fn a_sleeping_guest_stops_at_the_timeout() {
    let Some(sb) = common::sandbox("a_sleeping_guest_stops_at_the_timeout") else {
        return;
    };
    let ws = Workspace::temporary().unwrap();
    let limits = common::small_limits().with_timeout(Duration::from_secs(2));
    let out = common::run_in(
        &sb,
        &ws,
        Language::Python,
        "import time\nprint('start', flush=True)\ntime.sleep(3600)\nprint('woke')\n",
        limits,
    );
    assert_eq!(out.stopped, Some(Stop::Timeout), "{out:?}");
    assert_eq!(out.stdout, "start\n");
    assert!(
        out.error.as_deref().unwrap().contains("timeout of 2 s"),
        "{out:?}"
    );
    assert!(out.seconds < 60.0, "{out:?}");
}

#[test]
fn allocating_4_gb_stops_at_the_memory_limit() {
    let Some(sb) = common::sandbox("allocating_4_gb_stops_at_the_memory_limit") else {
        return;
    };
    // 64 blocks of 64 MiB: 4 GiB in all (wasm32 cannot index one 4 GiB object).
    let (out, _ws) = common::py(&sb, "blocks = []\nfor i in range(64):\n    blocks.append(bytearray(64 << 20))\nprint('ALLOCATED', len(blocks))\n");
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    assert!(!out.stdout.contains("ALLOCATED"), "{out:?}");
    assert!(out.stderr.contains("MemoryError"), "{}", out.stderr);
    assert!(out.memory_limit_hit, "{out:?}");
    assert!(
        out.memory_peak <= common::small_limits().memory_bytes,
        "{out:?}"
    );
    assert!(
        out.error
            .as_deref()
            .unwrap()
            .contains("memory limit of 256 MiB"),
        "{out:?}"
    );
}

#[test]
fn printing_1_gb_is_capped() {
    let Some(sb) = common::sandbox("printing_1_gb_is_capped") else {
        return;
    };
    let (out, _ws) = common::py(&sb, "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\nprint('DONE', file=sys.stderr)\n");
    let cap = common::small_limits().stdout_bytes;
    assert_eq!(out.stopped, Some(Stop::OutputLimit), "{:?}", out.error);
    assert!(out.stdout_truncated);
    assert_eq!(out.stdout.len(), cap);
    assert!(!out.stderr.contains("DONE"));
    assert!(
        out.error
            .as_deref()
            .unwrap()
            .contains("stdout passed its limit"),
        "{:?}",
        out.error
    );
}

#[test]
fn fork_and_subprocess_are_unsupported() {
    let Some(sb) = common::sandbox("fork_and_subprocess_are_unsupported") else {
        return;
    };
    let (out, _ws) = common::py(&sb, "import os\nos.fork()\n");
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    assert!(out.stderr.contains("fork"), "{}", out.stderr);
    let (out, _ws) = common::py(&sb, "import subprocess\nsubprocess.run(['ls', '/'])\n");
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    assert!(
        out.stderr
            .contains("OSError: [Errno 58] wasi does not support processes"),
        "{}",
        out.stderr
    );
    let (out, _ws) = common::py(&sb, "import os\nos.system('ls /')\n");
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    assert!(out.stderr.contains("system"), "{}", out.stderr);
}

#[test]
fn workspace_writes_are_capped() {
    let Some(sb) = common::sandbox("workspace_writes_are_capped") else {
        return;
    };
    let (out, ws) = common::py(&sb, "f = open('big.bin', 'wb')\nfor _ in range(64):\n    f.write(b'x' * 65536)\n    f.flush()\n");
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    assert!(out.file_limit_hit, "{out:?}");
    assert!(out.stderr.contains("No space left"), "{}", out.stderr);
    assert!(ws.read("big.bin").unwrap().len() as u64 <= common::small_limits().file_bytes);
    let (out, _ws) = common::py(
        &sb,
        "for i in range(100):\n    open(f'f{i}', 'w').close()\n",
    );
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    assert!(out.file_limit_hit, "{out:?}");
    assert!(out.files.created.len() <= 50, "{}", out.files.created.len());
}

#[test]
fn sixteen_concurrent_runs_are_isolated() {
    let Some(sb) = common::sandbox("sixteen_concurrent_runs_are_isolated") else {
        return;
    };
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let sb = sb.clone();
            std::thread::spawn(move || {
                let ws = Workspace::temporary().unwrap();
                let code = format!(
                    "import os\nopen('mine-{i}.txt', 'w').write('{i}' * 1000)\nprint(sorted(os.listdir('.')))\n"
                );
                let out = common::run_in(&sb, &ws, Language::Python, &code, Limits::default());
                (i, out, ws)
            })
        })
        .collect();
    for h in handles {
        let (i, out, ws) = h.join().unwrap();
        assert!(out.success(), "run {i}: {out:?}");
        assert_eq!(out.stdout, format!("['mine-{i}.txt']\n"), "run {i}");
        assert_eq!(
            ws.read(&format!("mine-{i}.txt")).unwrap(),
            i.to_string().repeat(1000).as_bytes()
        );
        let files: Vec<String> = ws.snapshot().files().into_iter().map(|f| f.path).collect();
        assert_eq!(files, vec![format!("mine-{i}.txt")], "run {i}");
    }
}
