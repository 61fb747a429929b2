//! Every kernel family compiles under NVRTC for several architectures, so a syntax or type
//! error in `cuda-ext/kernels/` fails CI, which has no GPU (NVRTC needs none).
//!
//! NVRTC comes from the `nvidia-cuda-nvrtc-cu12` wheel (scripts/requirements-test.txt);
//! scripts/test.sh points `WEFT_NVRTC_PATH` at its `lib` folder. Without NVRTC the test skips
//! loudly, except under CI (`CI` set), where it fails.

use weft_cuda::{kernels, nvrtc};

/// Ampere (A100), Ada (L4, RTX 40), Hopper (H100/H200), and Turing as the oldest we compile for.
const ARCHES: [&str; 4] = ["sm_75", "sm_80", "sm_89", "sm_90"];

fn nvrtc_or_skip() -> bool {
    match nvrtc::load() {
        Ok((ma, mi)) => {
            eprintln!("NVRTC {ma}.{mi}");
            true
        }
        Err(e) => {
            if std::env::var_os("CI").is_some() {
                panic!("{e} (CI must compile the CUDA kernels; see scripts/test.sh)");
            }
            eprintln!("SKIPPED: {e}");
            false
        }
    }
}

#[test]
fn every_kernel_family_compiles_for_every_arch() {
    if !nvrtc_or_skip() {
        return;
    }
    let mut failures = Vec::new();
    for (name, src) in kernels::SOURCES {
        for arch in ARCHES {
            match nvrtc::compile(name, &kernels::program(src), arch) {
                Ok(ptx) => {
                    let entries = ptx.matches(".entry ").count();
                    eprintln!(
                        "{name}/{arch}: {} bytes of PTX, {entries} kernels",
                        ptx.len()
                    );
                    if entries == 0 {
                        failures.push(format!("{name}/{arch}: no kernel in the PTX"));
                    }
                    // Every extern "C" kernel must be in the PTX under its own name.
                    for k in kernels::all_entry_points(src) {
                        if !ptx.contains(&format!(".entry {k}(")) {
                            failures.push(format!("{name}/{arch}: no entry {k} in the PTX"));
                        }
                    }
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_broken_kernel_is_reported_with_its_line() {
    if !nvrtc_or_skip() {
        return;
    }
    let src = "extern \"C\" __global__ void k(float* x) { x[0] = undefined_name; }";
    let e = nvrtc::compile("broken", src, "sm_80").unwrap_err();
    assert!(e.log.contains("undefined_name"), "{}", e.log);
}

#[test]
fn compiled_ptx_is_cached() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("weft-cuda-cache-{}", std::process::id()));
    std::env::set_var("WEFT_CUDA_CACHE", &dir);
    let src = kernels::program(kernels::source("elementwise").unwrap());
    let a = nvrtc::compile_cached("elementwise", &src, "sm_80").unwrap();
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(files.len(), 1);
    let b = nvrtc::compile_cached("elementwise", &src, "sm_80").unwrap();
    assert_eq!(a, b);
    let _ = std::fs::remove_dir_all(&dir);
}
