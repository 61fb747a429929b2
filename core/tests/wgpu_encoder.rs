//! The encoder ops on the wgpu backend against their CPU twins (random data), and
//! all-MiniLM-L6-v2 on wgpu against sentence-transformers' reference vectors.
//!
//! Tolerances: GELU (erf) within 2e-6 (the same formula; exp within an ulp); rows by position
//! and pooling exact up to summation order (1e-6); attention within 1e-5 (order of sums).

mod wgpu_support;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::wgpu::WgpuOptions;
use weft_core::backend::{Backend, Graph, PoolMode, RowIndex, SeqSpan, StepBatch};
use weft_core::embed::{cosine, EmbedInput, EmbedOptions, Embedder};
use weft_core::hf::HfModel;
use weft_core::test_support::{embedding_reference, floats, minilm_dir, EMBED_MIN_COSINE};
use wgpu_support::{assert_close, data, f32_tensor, gguf, Rng};

#[test]
fn encoder_ops_match_the_cpu() {
    let mut rng = Rng::new(11);
    let (n_head, n_kv, hd) = (4usize, 2usize, 32usize);
    let rows = 13;
    let (qc, kc) = (n_head * hd, n_kv * hd);
    let tensors = [
        f32_tensor("q", qc, rows, &rng.vec(qc * rows, 2.0)),
        f32_tensor("k", kc, rows, &rng.vec(kc * rows, 2.0)),
        f32_tensor("v", kc, rows, &rng.vec(kc * rows, 2.0)),
        f32_tensor("pos", qc, 16, &rng.vec(qc * 16, 1.0)),
        f32_tensor("x", qc, rows, &rng.vec(qc * rows, 6.0)),
    ];
    let Some(mut gpu) = wgpu_support::backend(&WgpuOptions::default()) else {
        return;
    };
    let mut cpu = CpuBackend::new(2);
    let file = gguf(&tensors);
    let load = |b: &mut dyn Backend, n: &str| b.load_weight(&file, n).unwrap();
    let w: Vec<_> = ["q", "k", "v", "pos", "x"]
        .iter()
        .map(|n| load(&mut cpu, n))
        .collect();
    for n in ["q", "k", "v", "pos", "x"] {
        load(&mut gpu, n);
    }
    // Rows: one id per row, the row itself (each table has `rows` rows except pos).
    let tokens: Vec<u32> = (0..rows as u32).collect();
    // Three sequences: packed (5 rows), padded (4 rows, 2 valid), packed (4 rows).
    let spans = vec![
        SeqSpan {
            start: 0,
            len: 5,
            valid: 5,
        },
        SeqSpan {
            start: 5,
            len: 4,
            valid: 2,
        },
        SeqSpan {
            start: 9,
            len: 4,
            valid: 4,
        },
    ];
    let positions: Vec<u32> = spans.iter().flat_map(|s| 0..s.len).collect();
    let seqs: Vec<u32> = spans
        .iter()
        .enumerate()
        .flat_map(|(i, s)| std::iter::repeat_n(i as u32, s.len as usize))
        .collect();
    let mut g = Graph::new(rows);
    let q = g.embed(w[0], 1.0);
    let k = g.embed(w[1], 1.0);
    let v = g.embed(w[2], 1.0);
    let x = g.embed(w[4], 1.0);
    let outs = [
        ("gelu_erf", g.gelu_erf(x), 2e-6),
        (
            "rows by position",
            g.embed_rows(w[3], RowIndex::Positions),
            0.0,
        ),
        ("fixed row", g.embed_rows(w[3], RowIndex::Fixed(3)), 0.0),
        (
            "encoder attention",
            g.encoder_attention(q, k, v, n_head, n_kv, hd, 0.2, spans.clone()),
            1e-5,
        ),
        ("mean pool", g.pool(x, spans.clone(), PoolMode::Mean), 1e-5),
        ("first", g.pool(x, spans.clone(), PoolMode::First), 0.0),
        ("last", g.pool(x, spans.clone(), PoolMode::Last), 0.0),
    ];
    for (_, t, _) in &outs {
        g.output(*t);
    }
    let batch = StepBatch {
        tokens: &tokens,
        positions: &positions,
        seqs: &seqs,
    };
    let c = cpu.execute(&g, &batch).unwrap();
    let d = gpu.execute(&g, &batch).unwrap();
    for (((what, _, tol), c), d) in outs.iter().zip(c).zip(d) {
        assert_close(what, &data(d), &data(c), *tol, *tol);
    }
    // A position past the learned table is an error, not a crash.
    let far: Vec<u32> = (0..rows as u32).map(|p| p + 10).collect();
    let mut g = Graph::new(rows);
    let t = g.embed_rows(w[3], RowIndex::Positions);
    g.output(t);
    let bad = StepBatch {
        tokens: &tokens,
        positions: &far,
        seqs: &seqs,
    };
    for b in [&mut cpu as &mut dyn Backend, &mut gpu] {
        let e = b.execute(&g, &bad).unwrap_err().to_string();
        assert!(e.contains("learned positions"), "{e}");
    }
}

#[test]
fn minilm_on_wgpu_matches_sentence_transformers() {
    let Some(dir) = minilm_dir() else { return };
    let Some(gpu) = wgpu_support::backend(&WgpuOptions::default()) else {
        return;
    };
    let r = embedding_reference();
    // Empty-ish, short, unicode and code (software Vulkan takes ~0.2 s a token; the long
    // inputs run on the CPU test, the kernels on every shape in the twin test above).
    let all = r["sentences"].as_array().unwrap();
    let sents: Vec<&serde_json::Value> = [0, 1, 5, 6, 19, 21, 24, 27, 28, 31]
        .iter()
        .map(|&i| &all[i])
        .collect();
    let inputs: Vec<EmbedInput> = sents
        .iter()
        .map(|s| EmbedInput::Text(s["text"].as_str().unwrap().into()))
        .collect();
    let hf = HfModel::open(&dir).unwrap();
    let mut e = Embedder::from_hf(hf, Box::new(gpu)).unwrap();
    let t = std::time::Instant::now();
    let out = e.embed(&inputs, &EmbedOptions::default()).unwrap();
    eprintln!("wgpu: {} inputs in {:?}", inputs.len(), t.elapsed());
    let mut worst = 1.0f64;
    for (v, s) in out.vectors.iter().zip(&sents) {
        let c = cosine(v, &floats(&s["embedding"]));
        assert!(c >= EMBED_MIN_COSINE, "{:?}: cosine {c}", s["text"]);
        worst = worst.min(c);
    }
    eprintln!("wgpu: lowest cosine {worst:.7}");
}
