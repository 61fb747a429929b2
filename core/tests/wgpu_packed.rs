//! Packed 8-bit activation quants: where the WGSL implementation has the
//! `packed_4x8_integer_dot_product` language extension (naga always), the quantizer and the
//! products use its built-ins; the core-WGSL fallback (`WgpuOptions::no_packed_builtins`, and
//! browsers without the extension) must give the same bits. Checked on prompt + decode steps of
//! SmolLM2 (Q4_1, Q8_0) and Gemma 3 (Q4_K, Q6_K, Q5_0, Q8_0) with every product kernel form: the
//! tiled prefill and cooperative rows (GPUs) and the row kernels (CPU adapters).

mod wgpu_support;

use weft_core::backend::wgpu::{MatMulKernel, WgpuOptions};
use weft_core::test_support::model_path;
use wgpu_support::Twin;

/// A 20-token prompt (a whole 16-token tile of the tiled kernel and a ragged one) and two
/// decode steps of model `key`, with the built-ins and without, kernel form `matmul`.
fn steps_match(key: &str, matmul: MatMulKernel) {
    let Some(path) = model_path(key) else {
        return;
    };
    let on = WgpuOptions {
        matmul: Some(matmul),
        ..Default::default()
    };
    let off = WgpuOptions {
        no_packed_builtins: true,
        ..on.clone()
    };
    let Some(mut t) = Twin::new(&on, &off) else {
        return;
    };
    assert!(!t.b.uses_packed_builtins());
    if std::env::var_os("WEFT_WGPU_NO_PACKED_DOT").is_none() {
        assert!(
            t.a.uses_packed_builtins(),
            "naga has the language extension"
        );
    }
    let prompt: Vec<u32> = (0..20).map(|i| 300 + 37 * i).collect();
    t.greedy_steps(&format!("{key} {matmul:?}"), &path, &prompt, 2);
}

#[test]
fn smollm2_is_identical_with_and_without_packed_builtins() {
    steps_match("smollm2", MatMulKernel::Cooperative);
    steps_match("smollm2", MatMulKernel::RowPerInvocation);
}

#[test]
fn gemma3_is_identical_with_and_without_packed_builtins() {
    steps_match("gemma3", MatMulKernel::Cooperative);
    steps_match("gemma3", MatMulKernel::RowPerInvocation);
}
