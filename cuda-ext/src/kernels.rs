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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_are_found() {
        let s = "extern \"C\" __global__ void a(int x) {}\nextern \"C\" __global__ void b_2(float* y) {}";
        assert_eq!(entry_points(s), vec!["a", "b_2"]);
        for (name, src) in SOURCES {
            assert!(!entry_points(src).is_empty(), "{name} defines no kernel");
        }
    }
}
