//! shader-f16: where the adapter has it, F16 weights and the f16 KV cache are read through
//! native f16 storage bindings; the u32-word fallback (`WgpuOptions::no_f16`) must give the
//! same bits. Checked on attention over an f16 cache, F16-weight products (every kernel form,
//! decode and prompt rows) and gathers, and prompt + decode steps of SmolLM2. Without the
//! feature both runs take the fallback (said loudly).

mod wgpu_support;

use weft_core::backend::wgpu::{MatMulKernel, WgpuOptions};
use weft_core::backend::{Graph, KvCacheSpec, KvDtype, KvLayerSpec, StepBatch};
use weft_core::dtype::GgmlType;
use weft_core::test_support::model_path;
use wgpu_support::{attention_graph, f32_tensor, gguf, qkv_tensors, Rng, TensorSpec, Twin};

/// f16 on (where the adapter has it) and off, otherwise with `opts`.
fn twin(opts: WgpuOptions) -> Option<Twin> {
    let off = WgpuOptions {
        no_f16: true,
        ..opts.clone()
    };
    let t = Twin::new(&opts, &off)?;
    assert!(!t.b.uses_f16());
    if std::env::var_os("WEFT_WGPU_NO_F16").is_none() {
        // shader-f16 is used exactly where the adapter has it.
        assert_eq!(t.a.uses_f16(), t.a.adapter().f16);
    }
    if !t.a.uses_f16() {
        eprintln!("note: adapter without shader-f16; both runs unpack u32 words");
    }
    Some(t)
}

fn batch<'a>(tokens: &'a [u32], positions: &'a [u32], seqs: &'a [u32]) -> StepBatch<'a> {
    StepBatch {
        tokens,
        positions,
        seqs,
    }
}

#[test]
fn attention_over_an_f16_cache_is_identical_with_and_without_f16() {
    let mut rng = Rng::new(31);
    let (n_head, n_kv, hd) = (4usize, 2usize, 64usize);
    let mut tensors = qkv_tensors(&mut rng, n_head, n_kv, hd, 80);
    // Every 7th key and value tiny: they become f16 subnormals in the cache, which both reads
    // must widen alike.
    for t in &mut tensors[1..] {
        let v: &mut [f32] = bytemuck::cast_slice_mut(&mut t.data);
        for x in v.iter_mut().step_by(7) {
            *x *= 3e-6;
        }
    }
    let Some(mut t) = twin(WgpuOptions::default()) else {
        return;
    };
    let file = gguf(&tensors);
    let w = ["q", "k", "v"].map(|n| t.load(&file, n));
    let layer = |window: Option<usize>| KvLayerSpec {
        n_kv_head: n_kv,
        head_dim_k: hd,
        head_dim_v: hd,
        capacity: 80,
        window,
    };
    let kv = t.kv(&KvCacheSpec {
        layers: vec![layer(None), layer(Some(6))],
        n_seq: 1,
        dtype: KvDtype::F16,
        pool_blocks: None,
    });
    // A 70-token prompt, then two decode steps.
    let steps: [(Vec<u32>, Vec<u32>); 3] = [
        ((0..70).collect(), (0..70).collect()),
        (vec![70], vec![70]),
        (vec![71], vec![71]),
    ];
    for (si, (tokens, pos)) in steps.iter().enumerate() {
        let g = attention_graph(tokens.len(), w, kv, 2, n_head, hd);
        let seqs = vec![0; tokens.len()];
        let out = t.run(&format!("step {si}"), &g, &batch(tokens, pos, &seqs));
        assert!(out.iter().flatten().all(|x| x.is_finite()));
    }
}

/// `rows × cols` F16 weights of random finite values, about one in six an f16 subnormal.
fn f16_weights(rng: &mut Rng, name: &str, cols: usize, rows: usize) -> TensorSpec {
    let data = (0..cols * rows)
        .flat_map(|_| {
            let r = rng.next_u64();
            let exp = (r >> 20) % 18; // 0 (subnormal) ..= 17: magnitudes below 8
            let h = ((r & 1) << 15) as u16 | ((exp as u16) << 10) | (r >> 4) as u16 & 0x3FF;
            h.to_le_bytes()
        })
        .collect();
    TensorSpec {
        name: name.into(),
        ty: GgmlType::F16,
        cols,
        rows,
        data,
    }
}

#[test]
fn f16_weight_products_and_gathers_are_identical_with_and_without_f16() {
    let mut rng = Rng::new(37);
    let (cols, rows, n) = (160usize, 75usize, 7usize);
    let tensors = [
        f16_weights(&mut rng, "w", cols, rows),
        f32_tensor("x", cols, n, &rng.vec(cols * n, 1.0)),
    ];
    let file = gguf(&tensors);
    for kernel in [MatMulKernel::Cooperative, MatMulKernel::RowPerInvocation] {
        let Some(mut t) = twin(WgpuOptions {
            matmul: Some(kernel),
            ..Default::default()
        }) else {
            return;
        };
        let (w, x) = (t.load(&file, "w"), t.load(&file, "x"));
        // One row (decode) and seven (prompt: token tiles), gathers of F16 rows too.
        for m in [1, n] {
            let ids: Vec<u32> = (0..m as u32).collect();
            let mut g = Graph::new(m);
            let xt = g.embed(x, 1.0);
            let y = g.matmul(w, xt);
            g.output(y);
            let e = g.embed(w, 0.5);
            g.output(e);
            let out = t.run(
                &format!("{kernel:?}, {m} rows"),
                &g,
                &batch(&ids, &ids, &vec![0; m]),
            );
            assert_eq!(out[0].len(), m * rows);
            assert!(out.iter().flatten().all(|v| v.is_finite()));
        }
    }
}

#[test]
fn smollm2_steps_are_identical_with_and_without_f16() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let Some(mut t) = twin(WgpuOptions::default()) else {
        return;
    };
    // A 6-token prompt, then two decode steps feeding back the argmax.
    t.greedy_steps("smollm2", &path, &[1, 504, 3458, 282, 4198, 314], 2);
}
