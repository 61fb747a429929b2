//! `weft bench`: the JSON report has the documented shape and measured, positive rates.

use std::process::Command;

use weft_core::test_support::model_path;

#[test]
fn bench_json_reports_rates_and_rss() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["bench", "--model"])
        .arg(&path)
        .args(["-p", "16", "-n", "4", "-r", "2", "--threads", "2", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["engine"], "weft");
    assert_eq!(j["backend"], "cpu");
    assert_eq!(j["threads"], 2);
    assert_eq!(j["n_prompt"], 16);
    assert_eq!(j["n_gen"], 4);
    for key in ["prompt_tokens_per_s", "gen_tokens_per_s"] {
        let s = &j[key];
        let (min, med, max) = (
            s["min"].as_f64().unwrap(),
            s["median"].as_f64().unwrap(),
            s["max"].as_f64().unwrap(),
        );
        assert!(min > 0.0 && min <= med && med <= max, "{key}: {s}");
    }
    // The model is memory-mapped and touched: RSS is at least a good part of the file.
    assert!(j["peak_rss_bytes"].as_u64().unwrap() > 20_000_000);
}

#[test]
fn bench_rejects_bad_arguments_with_one_line() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    for args in [
        &["-r", "0"][..],
        &["-p", "0", "-n", "0"],
        &["--backend", "tpu"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["bench", "--model"])
            .arg(&path)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.starts_with("weft: error:") && err.trim_end().lines().count() == 1,
            "{args:?}: {err}"
        );
    }
}
