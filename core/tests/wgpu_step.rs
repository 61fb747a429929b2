//! The speed structure of the wgpu backend on the reference models: one submission per step,
//! pipelines compiled once, greedy decoding reading back only the sampled id and its logit.
//! Prints dispatches per token and decode speed (figures for docs/benchmarks.md; nothing here
//! asserts a time).

mod wgpu_support;

use std::sync::Arc;
use std::time::Instant;

use weft_core::backend::wgpu::{MatMulKernel, WgpuOptions};
use weft_core::backend::{Backend, Graph, KvCacheSpec, KvDtype, Readback, StepBatch};
use weft_core::gguf::ModelFile;
use weft_core::test_support::model_path;

const DECODE_STEPS: usize = 8;
const PROMPT: usize = 32;

fn run(key: &str) {
    let Some(path) = model_path(key) else { return };
    // WEFT_WGPU_MATMUL=cooperative|rows forces the product kernels (to time the GPU kernels
    // on a CPU adapter, or the reverse); by default the adapter's kind picks.
    let matmul = match std::env::var("WEFT_WGPU_MATMUL").as_deref() {
        Ok("cooperative") => Some(MatMulKernel::Cooperative),
        Ok("rows") => Some(MatMulKernel::RowPerInvocation),
        _ => None,
    };
    let opts = WgpuOptions {
        matmul,
        ..Default::default()
    };
    let Some(mut be) = wgpu_support::backend(&opts) else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let model = weft_core::model::load(&file, &mut be, &mut |_, _| {}).unwrap();
    let kv = be
        .create_kv_cache(&KvCacheSpec {
            layers: model.kv_layers(128, 16),
            n_seq: 1,
            dtype: KvDtype::F16,
            pool_blocks: None,
        })
        .unwrap();
    // A 32-token prompt: prefill speed (token tiles of the product) is printed too.
    let prompt: Vec<u32> = (1..=PROMPT as u32).collect();
    let mut g = Graph::new(prompt.len());
    let logits = model.build(&mut g, kv, &[prompt.len() as u32 - 1]);
    let top = g.top_k(logits, 1);
    g.output(top);
    let pos: Vec<u32> = (0..prompt.len() as u32).collect();
    let batch = StepBatch {
        tokens: &prompt,
        positions: &pos,
        seqs: &[0; PROMPT],
    };
    // Twice: the first compiles the pipelines; the second (same positions, same cache
    // contents) is timed.
    be.execute(&g, &batch).unwrap();
    let t = Instant::now();
    let out = be.execute(&g, &batch).unwrap();
    let prefill_secs = t.elapsed().as_secs_f64();
    let prefill_dispatches = be.last_step_stats().dispatches;
    let Readback::TopK { ids, .. } = &out[0] else {
        panic!("expected top-k")
    };
    let mut token = ids[0];
    // Decode's product kernel differs from prefill's on CPU adapters: it is compiled in the
    // first decode step, which is not timed; later steps compile nothing.
    let mut compiled = 0;
    let mut secs = 0.0;
    let mut stats = be.last_step_stats();
    for step in 0..DECODE_STEPS {
        let p = (prompt.len() + step) as u32;
        let mut g = Graph::new(1);
        let logits = model.build(&mut g, kv, &[0]);
        let top = g.top_k(logits, 1);
        g.output(top);
        let t = Instant::now();
        let out = be
            .execute(
                &g,
                &StepBatch {
                    tokens: &[token],
                    positions: &[p],
                    seqs: &[0],
                },
            )
            .unwrap();
        if step > 0 {
            secs += t.elapsed().as_secs_f64();
        } else {
            compiled = be.pipelines_compiled();
        }
        let Readback::TopK { ids, values, .. } = &out[0] else {
            panic!("expected top-k")
        };
        assert!(values[0].is_finite() && (ids[0] as usize) < model.info().n_vocab);
        token = ids[0];
        stats = be.last_step_stats();
        assert_eq!(stats.submissions, 1, "one submission per token");
        assert_eq!(
            stats.readback_bytes, 8,
            "greedy decode reads back one id and one logit"
        );
        // At most one dispatch per node, plus one activation quantization per product, plus
        // extra chunks of split weights.
        let nodes = g.nodes.len();
        let products = g
            .nodes
            .iter()
            .filter(|n| matches!(n.op, weft_core::backend::Op::MatMul { .. }))
            .count();
        assert!(
            stats.dispatches <= nodes + products + 4,
            "{} dispatches for {nodes} nodes",
            stats.dispatches
        );
    }
    assert_eq!(
        be.pipelines_compiled(),
        compiled,
        "decode steps after the first compile nothing new"
    );
    eprintln!(
        "{key} on {} ({}): {} dispatches, {} copies per decode token; {:.2} tokens/s over \
         the last {} steps; prefill of {PROMPT} tokens {:.2} tokens/s, {prefill_dispatches} \
         dispatches ({matmul:?} products)",
        be.adapter().name,
        be.adapter().backend,
        stats.dispatches,
        stats.copies,
        (DECODE_STEPS - 1) as f64 / secs,
        DECODE_STEPS - 1,
        PROMPT as f64 / prefill_secs
    );
}

#[test]
fn smollm2_step_structure() {
    run("smollm2");
}

#[test]
fn gemma3_step_structure() {
    run("gemma3");
}

#[test]
fn qwen2_step_structure() {
    run("qwen2");
}
