//! The CUDA C kernel sources, one file per kernel family (as `shaders-wgsl/`), embedded in the
//! binary and compiled by NVRTC at run time.
//!
//! Every family is compiled as `common.cuh` and `quant.cuh` followed by the family's file, so
//! the sources need no include path (NVRTC has no CUDA headers here: half/bfloat conversions
//! are in `common.cuh` as PTX `cvt` instructions).

/// Shared helpers (f16/bf16 conversion, warp reductions).
pub const COMMON: &str = include_str!("../kernels/common.cuh");
/// Weight block layouts, activation quantization and per-type block dots.
pub const QUANT: &str = include_str!("../kernels/quant.cuh");

/// (family name, source) of every kernel family.
pub const SOURCES: &[(&str, &str)] = &[
    ("elementwise", include_str!("../kernels/elementwise.cu")),
    ("matvec", include_str!("../kernels/matvec.cu")),
    ("norm", include_str!("../kernels/norm.cu")),
    ("rope", include_str!("../kernels/rope.cu")),
    ("kv", include_str!("../kernels/kv.cu")),
    ("attention", include_str!("../kernels/attention.cu")),
    ("softmax", include_str!("../kernels/softmax.cu")),
    ("embed", include_str!("../kernels/embed.cu")),
    ("encoder", include_str!("../kernels/encoder.cu")),
];

/// The full text NVRTC compiles for a family's source.
pub fn program(source: &str) -> String {
    format!("{COMMON}\n{QUANT}\n{source}")
}

/// The source of the family called `name`.
pub fn source(name: &str) -> Option<&'static str> {
    SOURCES.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

/// The `extern "C" __global__` kernel names a source defines (what the PTX must export).
pub fn entry_points(source: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = source;
    while let Some(i) = rest.find("__global__ void ") {
        let after = &rest[i + "__global__ void ".len()..];
        let end = after.find('(').unwrap_or(0);
        let name = after[..end].trim();
        // Names pasted by a macro (`matvec_##NAME`) are not checkable by text.
        if !name.is_empty() && !name.contains('#') {
            out.push(name);
        }
        rest = &after[end..];
    }
    out
}

/// Every kernel a family's program exports: its own entry points, those a `PRODUCTS(NAME, T)`
/// line generates (`matvec_NAME`, `matmul_NAME`) and a `TILED(NAME, T)` line
/// (`matmul_tiled_NAME`), and the activation quantizers of `quant.cuh` (in every program).
pub fn all_entry_points(source: &str) -> Vec<String> {
    let mut out: Vec<String> = entry_points(source)
        .into_iter()
        .chain(entry_points(QUANT))
        .map(String::from)
        .collect();
    for line in source.lines() {
        if let Some(rest) = line.strip_prefix("PRODUCTS(") {
            let name = rest.split(',').next().unwrap_or("").trim();
            out.push(format!("matvec_{name}"));
            out.push(format!("matmul_{name}"));
        }
        if let Some(rest) = line.strip_prefix("TILED(") {
            let name = rest.split(',').next().unwrap_or("").trim();
            out.push(format!("matmul_tiled_{name}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_are_found() {
        let s = "extern \"C\" __global__ void a(int x) {}\nextern \"C\" __global__ void b_2(float* y) {}";
        assert_eq!(entry_points(s), vec!["a", "b_2"]);
        let all = all_entry_points(source("matvec").unwrap());
        for k in [
            "matvec_q4_k",
            "matmul_q6_k",
            "matvec_bf16",
            "quantize_q8_1",
            "matmul_tiled_q5_1",
        ] {
            assert!(all.iter().any(|n| n == k), "{k}");
        }
        for (name, src) in SOURCES {
            assert!(
                all_entry_points(src).len() > entry_points(QUANT).len(),
                "{name} defines no kernel"
            );
        }
    }
}
