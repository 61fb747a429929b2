//! The reduction kernels (softmax, attention, top-k) with and without subgroup operations:
//! bit-identical to each other (subgroups only take maxima and best indices), top-k identical
//! to the CPU backend, softmax and attention as close to it as `wgpu_parity` requires.
//! On an adapter without subgroups both runs take the workgroup-memory path.

mod wgpu_support;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::wgpu::WgpuOptions;
use weft_core::backend::{Backend, Graph, KvCacheSpec, KvDtype, KvLayerSpec, StepBatch, Weight};
use wgpu_support::{
    assert_attention_close, assert_close, attention_graph, bits, data, f32_tensor, gguf,
    qkv_tensors, Rng, TensorSpec, Twin,
};

/// The CPU backend and the wgpu backend with subgroups (where the adapter has them, `twin.a`)
/// and without (`twin.b`), holding the same weights.
struct Trio {
    cpu: CpuBackend,
    twin: Twin,
    weights: Vec<(String, Weight)>,
}

impl Trio {
    fn new(tensors: &[TensorSpec]) -> Option<Trio> {
        let plain = WgpuOptions {
            no_subgroups: true,
            ..Default::default()
        };
        let twin = Twin::new(&WgpuOptions::default(), &plain)?;
        let sg = &twin.a;
        assert!(!twin.b.uses_subgroups());
        if std::env::var_os("WEFT_WGPU_NO_SUBGROUPS").is_none() {
            // Subgroups are used exactly where the adapter has them.
            assert_eq!(sg.uses_subgroups(), sg.adapter().subgroups.is_some());
        }
        if !sg.uses_subgroups() {
            eprintln!("note: adapter without subgroups; both runs use workgroup memory");
        }
        let file = gguf(tensors);
        let mut t = Trio {
            cpu: CpuBackend::new(2),
            twin,
            weights: Vec::new(),
        };
        for spec in tensors {
            let n = &spec.name;
            let a = t.cpu.load_weight(&file, n).unwrap();
            assert_eq!(a, t.twin.load(&file, n));
            t.weights.push((n.clone(), a));
        }
        Some(t)
    }

    fn weight(&self, name: &str) -> Weight {
        self.weights.iter().find(|(n, _)| n == name).unwrap().1
    }

    /// Runs `g` on all three; returns (subgroups, cpu) outputs, after checking the two wgpu
    /// runs agree bit for bit.
    fn run(
        &mut self,
        g: &Graph,
        tokens: &[u32],
        positions: &[u32],
        seqs: &[u32],
    ) -> Vec<[Vec<f32>; 2]> {
        let batch = StepBatch {
            tokens,
            positions,
            seqs,
        };
        let a = self.twin.run("subgroups vs plain", g, &batch);
        let c = self.cpu.execute(g, &batch).unwrap();
        a.into_iter().zip(c).map(|(a, c)| [a, data(c)]).collect()
    }
}

#[test]
fn top_k_and_softmax_match_with_and_without_subgroups() {
    let mut rng = Rng::new(21);
    let cols = 1056; // not a multiple of the workgroup
    let rows = 5;
    let mut v = rng.vec(cols * rows, 4.0);
    // Row 1: a three-way tie for the maximum, ties further down, spread across subgroups.
    for &i in &[cols + 3, cols + 411, cols + 998] {
        v[i] = 9.0;
    }
    v[cols + 7] = 8.5;
    v[cols + 600] = 8.5;
    // Row 2: all negative, so a "none" candidate must not win as 0.0 would.
    for x in &mut v[2 * cols..3 * cols] {
        *x = -x.abs() - 1.0;
    }
    // Row 3: the maximum is zero, -0.0 before +0.0 (one value: the lower index wins).
    for x in &mut v[3 * cols..4 * cols] {
        *x = -x.abs() - 0.5;
    }
    v[3 * cols + 50] = -0.0;
    v[3 * cols + 100] = 0.0;
    v[3 * cols + 900] = -0.0;
    // Row 4: every value equal.
    for x in &mut v[4 * cols..5 * cols] {
        *x = 0.25;
    }
    let Some(mut t) = Trio::new(&[f32_tensor("x", cols, rows, &v)]) else {
        return;
    };
    let xw = t.weight("x");
    let tokens: Vec<u32> = (0..rows as u32).collect();
    let mut g = Graph::new(rows);
    let x = g.embed(xw, 1.0);
    let k1 = g.top_k(x, 1);
    let k8 = g.top_k(x, 8);
    let sm = g.softmax(x);
    g.output(k1);
    g.output(k8);
    g.output(sm);
    let res = t.run(&g, &tokens, &tokens, &vec![0; rows]);
    assert_eq!(bits(&res[0][0]), bits(&res[0][1]), "argmax vs CPU");
    assert_eq!(bits(&res[1][0]), bits(&res[1][1]), "top-8 vs CPU");
    assert_close("softmax", &res[2][0], &res[2][1], 1e-5, 1e-5);
    // Ids of row 1 and 3 (8 per row): ties resolve to the lowest index first.
    assert_eq!(&res[1][0][8..13], &[3.0, 411.0, 998.0, 7.0, 600.0]);
    assert_eq!(&res[1][0][24..27], &[50.0, 100.0, 900.0]);
    assert_eq!(&res[1][0][32..40], &[0.0, 1., 2., 3., 4., 5., 6., 7.]);
}

fn attention_case(dtype: KvDtype) {
    let mut rng = Rng::new(23);
    let (n_head, n_kv, hd) = (4usize, 2usize, 64usize);
    let tensors = qkv_tensors(&mut rng, n_head, n_kv, hd, 96);
    let Some(mut t) = Trio::new(&tensors) else {
        return;
    };
    let w = ["q", "k", "v"].map(|n| t.weight(n));
    let spec = KvCacheSpec {
        layers: vec![KvLayerSpec {
            n_kv_head: n_kv,
            head_dim_k: hd,
            head_dim_v: hd,
            capacity: 96,
            window: None,
        }],
        n_seq: 1,
        dtype,
        pool_blocks: None,
    };
    let a = t.cpu.create_kv_cache(&spec).unwrap();
    assert_eq!(a, t.twin.kv(&spec));
    // A 70-token prompt (more keys than the 64-invocation workgroup), then two decode steps.
    let steps: Vec<(Vec<u32>, Vec<u32>)> = vec![
        ((0..70).collect(), (0..70).collect()),
        (vec![70], vec![70]),
        (vec![71], vec![71]),
    ];
    for (si, (tokens, pos)) in steps.iter().enumerate() {
        let g = attention_graph(tokens.len(), w, a, 1, n_head, hd);
        let res = t.run(&g, tokens, pos, &vec![0; tokens.len()]);
        assert_attention_close(&format!("step {si}"), dtype, &res[0][0], &res[0][1]);
    }
}

#[test]
fn attention_matches_with_and_without_subgroups_f16_cache() {
    attention_case(KvDtype::F16);
}

#[test]
fn attention_matches_with_and_without_subgroups_f32_cache() {
    attention_case(KvDtype::F32);
}
