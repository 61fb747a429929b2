//! `--backend cuda` on a machine without a CUDA driver (CI, this machine): one clear line on
//! stderr and exit status 1, for `run` and `bench`; `weft devices` still lists the wgpu
//! adapters and says why there are no CUDA devices. On a machine with a driver these checks
//! skip (the GPU script, bench/gpu-check.sh, covers that case).

use std::process::Command;

use weft_core::test_support::model_path;

fn weft() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weft"))
}

fn has_driver() -> bool {
    if weft_cuda::probe().is_ok() {
        eprintln!("a CUDA driver is present; skipping the no-driver checks");
        return true;
    }
    false
}

#[test]
fn run_and_bench_print_one_line_without_a_driver() {
    if has_driver() {
        return;
    }
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let runs = [
        vec![
            "run",
            "--prompt",
            "hi",
            "--max-tokens",
            "1",
            "--backend",
            "cuda",
        ],
        vec!["bench", "-p", "4", "-n", "1", "--backend", "cuda"],
        vec![
            "run",
            "--prompt",
            "hi",
            "--backend",
            "CUDA",
            "--gpu-device",
            "1",
        ],
    ];
    for args in runs {
        let out = weft()
            .args(&args)
            .arg("--model")
            .arg(&model)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(
            err.trim_end(),
            format!("weft: error: {}", weft_cuda::NO_DRIVER),
            "{args:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn devices_says_why_there_is_no_cuda_device() {
    if has_driver() {
        return;
    }
    let out = weft().arg("devices").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .next()
            .unwrap_or("")
            .starts_with("CUDA: no CUDA driver found"),
        "{text}"
    );
}

/// `weft parity` (what bench/gpu-check.sh runs on a GPU) works end to end; the CPU against
/// itself gives the same bits for every type.
#[test]
fn parity_harness_runs_on_the_cpu() {
    let out = weft()
        .args([
            "parity",
            "--backend",
            "cpu",
            "--rows",
            "16",
            "--cols",
            "256",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 33, "{text}");
    assert!(rows.iter().all(|r| r.ends_with("yes")), "{text}");
}
