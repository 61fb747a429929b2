//! Helpers shared by the quant integration tests: running the Python oracle scripts.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// Path of a helper script under `scripts/py/`.
pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts/py")
        .join(name)
}

/// Whether `python3` with numpy and the `gguf` package is available. Outside CI a missing
/// oracle skips the test loudly; under CI (`CI` set) it fails.
pub fn python_ready() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy, gguf"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("python3 with numpy and gguf is required under CI (pip install numpy gguf)");
        }
        eprintln!("\n*** SKIPPING: python3 with numpy and gguf is not available ***\n");
    }
    ok
}

/// Runs a helper script and returns its stdout (trimmed); panics with its stderr on failure.
pub fn run_script(name: &str, args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg(script(name))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 {name}: {e}"));
    assert!(
        out.status.success(),
        "{name} {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Fingerprint of f32 values, identical to `Fingerprint` in scripts/py/quant_reference.py:
/// two wrapping 64-bit sums over the bit patterns.
pub fn fingerprint(values: &[f32]) -> String {
    const K1: u64 = 0x9E3779B97F4A7C15;
    const K2: u64 = 0x632BE59BD9B4E019;
    const K3: u64 = 0xD6E8FEB86659FD93;
    const K4: u64 = 0xA0761D6478BD642F;
    let (mut h1, mut h2) = (0u64, 0u64);
    for (i, v) in values.iter().enumerate() {
        let w = v.to_bits() as u64;
        let i = i as u64;
        h1 = h1.wrapping_add(w.wrapping_mul(i.wrapping_mul(K1).wrapping_add(K2) | 1));
        h2 = h2.wrapping_add(w.wrapping_mul(K3) ^ i.wrapping_mul(K4));
    }
    format!("{h1:016x}{h2:016x}")
}

/// Index and values of the first element whose bits differ, if any.
pub fn first_difference(ours: &[f32], theirs: &[f32]) -> Option<(usize, f32, f32)> {
    ours.iter()
        .zip(theirs)
        .enumerate()
        .find(|(_, (a, b))| a.to_bits() != b.to_bits())
        .map(|(i, (a, b))| (i, *a, *b))
}

/// Reads little-endian f32 values from a file.
pub fn read_f32_file(path: &std::path::Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}
