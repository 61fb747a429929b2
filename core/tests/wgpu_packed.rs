//! Packed 8-bit activation quants: where the WGSL implementation has the
//! `packed_4x8_integer_dot_product` language extension (naga always), the quantizer and the
//! products use its built-ins; the core-WGSL fallback (`WgpuOptions::no_packed_builtins`, and
//! browsers without the extension) must give the same bits. Checked on prompt + decode steps of
//! SmolLM2 (Q4_1, Q8_0) and Gemma 3 (Q4_K, Q6_K, Q5_0, Q8_0) with every product kernel form: the
//! tiled prefill and cooperative rows (GPUs) and the row kernels (CPU adapters).

mod wgpu_support;

use std::sync::Arc;

use weft_core::backend::wgpu::{MatMulKernel, WgpuOptions};
use weft_core::backend::{Graph, KvCacheSpec, KvDtype, StepBatch};
use weft_core::gguf::ModelFile;
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
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let model = weft_core::model::load(&file, &mut t.a, &mut |_, _| {}).unwrap();
    // The same weights in the same order: the graph's handles hold for both backends.
    weft_core::model::load(&file, &mut t.b, &mut |_, _| {}).unwrap();
    let spec = KvCacheSpec {
        layers: model.kv_layers(32, 8),
        n_seq: 1,
        dtype: KvDtype::F16,
    };
    let kv = t.kv(&spec);
    let mut tokens: Vec<u32> = (0..20).map(|i| 300 + 37 * i).collect();
    let mut pos: Vec<u32> = (0..tokens.len() as u32).collect();
    for step in 0..3 {
        let last = tokens.len() as u32 - 1;
        let mut g = Graph::new(tokens.len());
        let logits = model.build(&mut g, kv, &[last]);
        g.output(logits);
        let seqs = vec![0; tokens.len()];
        let batch = StepBatch {
            tokens: &tokens,
            positions: &pos,
            seqs: &seqs,
        };
        let out = t.run(&format!("{key} {matmul:?} step {step}"), &g, &batch);
        let l = &out[0];
        let best = (0..l.len()).max_by(|&i, &j| l[i].total_cmp(&l[j])).unwrap();
        let next = pos[pos.len() - 1] + 1;
        tokens = vec![best as u32];
        pos = vec![next];
    }
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
