//! Kernel parity of the wgpu backend against the CPU backend (and, for the fused dequantize +
//! product, against an exact f64 oracle) on random data, for every weight type the kernels
//! read and for awkward shapes: rows not a multiple of the workgroup, K not a multiple of 256,
//! token counts not a multiple of the token tile, tensors split across several bindings.
//!
//! Tolerances (stated per check): the products must be within 1e-5 of Σ|w·x| of the f64 oracle
//! (i.e. f32 rounding only) and within 1e-2 of Σ|w·x| of the CPU backend (which may quantize
//! activations, as llama.cpp does), and bit-identical to the CPU for quantized weights where
//! the CPU runs the kernels whose order the GPU follows (`mirrors_cpu_order`); RMSNorm and
//! GELU bit-identical; other ops within a few f32 ulps of the CPU, f16 attention within one
//! f16 rounding step.

mod wgpu_support;

use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::wgpu::{MatMulKernel, WgpuBackend, WgpuOptions};
use weft_core::backend::{
    Backend, BackendError, Graph, KvCacheSpec, KvDtype, KvLayerSpec, StepBatch, Weight, KV_BLOCK,
};
use weft_core::dtype::GgmlType;
use weft_core::gguf::ModelFile;
use wgpu_support::{
    assert_attention_close, assert_close, attention_graph, data, f32_tensor, gguf, qkv_tensors,
    random_tensor, Rng, TensorSpec,
};

/// Both backends holding the same weights (handles are equal: loaded in the same order).
struct Pair {
    cpu: CpuBackend,
    gpu: WgpuBackend,
    file: Arc<ModelFile>,
}

impl Pair {
    fn new(tensors: &[TensorSpec], opts: WgpuOptions) -> Option<Pair> {
        let gpu = wgpu_support::backend(&opts)?;
        Some(Pair {
            cpu: CpuBackend::new(2),
            gpu,
            file: gguf(tensors),
        })
    }

    fn load(&mut self, name: &str) -> Weight {
        let a = self.cpu.load_weight(&self.file, name).unwrap();
        let b = self.gpu.load_weight(&self.file, name).unwrap();
        assert_eq!(a, b);
        a
    }

    fn kv(&mut self, spec: &KvCacheSpec) -> weft_core::backend::KvCacheId {
        let a = self.cpu.create_kv_cache(spec).unwrap();
        let b = self.gpu.create_kv_cache(spec).unwrap();
        assert_eq!(a, b);
        a
    }

    /// Runs a graph on both; returns (gpu, cpu) outputs as f32 data.
    fn run(
        &mut self,
        g: &Graph,
        tokens: &[u32],
        positions: &[u32],
        seqs: &[u32],
    ) -> Vec<(Vec<f32>, Vec<f32>)> {
        let batch = StepBatch {
            tokens,
            positions,
            seqs,
        };
        let c = self.cpu.execute(g, &batch).unwrap();
        let w = self.gpu.execute(g, &batch).unwrap();
        w.into_iter()
            .zip(c)
            .map(|(a, b)| (data(a), data(b)))
            .collect()
    }
}

fn seq_positions(n: usize) -> (Vec<u32>, Vec<u32>) {
    ((0..n as u32).collect(), vec![0; n])
}

const PRODUCT_TYPES: &[GgmlType] = &[
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    // No kernel dequantizer: converted to f32 at load.
    GgmlType::Q5_1,
];

fn cols_for(ty: GgmlType) -> usize {
    // K-quants need whole 256-blocks (512: the tiled kernel's 4-unit K steps cross a block
    // boundary); the others get K = 288, nine 32-element units: not a multiple of 256 or 64,
    // and two whole K steps of the tiled kernel then a partial one.
    if ty.block_size() == 256 {
        512
    } else {
        288
    }
}

/// The activations a product with a `ty` weight really uses: quantized to the CPU backend's
/// partner type and dequantized (or `x` itself for float weights).
fn partner_image(ty: GgmlType, x: &[f32]) -> Vec<f32> {
    use weft_core::quant;
    let vdt = quant::dot::vec_dot_type(ty);
    if !(quant::dot::supports_vec_dot(ty) && quant::can_quantize(vdt)) || vdt == GgmlType::F32 {
        return x.to_vec();
    }
    let mut q = vec![0u8; vdt.bytes_for(x.len() as u64).unwrap() as usize];
    quant::dot::quantize_activation_to(vdt, x, &mut q).unwrap();
    quant::dequantize_to_vec(vdt, &q, x.len()).unwrap()
}

/// Q4_1 weights meet Q8_1 activations, whose blocks store s = f16(d·Σq) (d unrounded) for
/// the weights' minimum term, as llama.cpp does: both backends multiply the minimum m by s,
/// not by the sum of the dequantized activations. Returns Σ_blocks m·(s − Σx̂) for row `r`.
fn q8_1_sum_correction(w: &TensorSpec, r: usize, image: &[f32], raw: &[f32]) -> f64 {
    use weft_core::quant;
    if w.ty != GgmlType::Q4_1 {
        return 0.0;
    }
    let mut act = vec![0u8; GgmlType::Q8_1.bytes_for(raw.len() as u64).unwrap() as usize];
    quant::dot::quantize_activation_to(GgmlType::Q8_1, raw, &mut act).unwrap();
    let f16 = |b: &[u8]| half::f16::from_le_bytes([b[0], b[1]]).to_f32() as f64;
    let row = &w.data[r * w.cols / 32 * 20..(r + 1) * w.cols / 32 * 20];
    let mut c = 0.0;
    for (b, (wb, ab)) in row.chunks(20).zip(act.chunks(36)).enumerate() {
        let sum: f64 = image[32 * b..32 * (b + 1)].iter().map(|&v| v as f64).sum();
        c += f16(&wb[2..4]) * (f16(&ab[2..4]) - sum);
    }
    c
}

/// Whether the GPU product follows the CPU backend's float order for `ty` on this machine, so
/// the two must agree bit for bit (matmul.wgsl): the K-quants always (their scalar and AVX2
/// kernels agree), the 32-element types where the CPU runs its AVX2 kernels.
fn mirrors_cpu_order(ty: GgmlType) -> bool {
    use GgmlType::*;
    let simd = weft_core::quant::dot::has_simd_kernel(ty)
        && !matches!(
            std::env::var("WEFT_DOT_KERNELS").as_deref(),
            Ok("scalar") | Ok("f32")
        );
    match ty {
        Q4_K | Q5_K | Q6_K => std::env::var("WEFT_DOT_KERNELS").as_deref() != Ok("f32"),
        Q4_0 | Q4_1 | Q5_0 | Q8_0 => simd,
        _ => false,
    }
}

/// Checks a `rows × cols` product of `w` with `x` (n × cols) against f64 (on the activations'
/// partner-type image, as both backends quantize them) and the CPU.
fn check_product(what: &str, w: &TensorSpec, x: &[f32], n: usize, gpu: &[f32], cpu: &[f32]) {
    let raw: Vec<&[f32]> = x.chunks(w.cols).collect();
    let x = &partner_image(w.ty, x);
    let wf = weft_core::quant::dequantize_to_vec(w.ty, &w.data, w.cols * w.rows).unwrap();
    for t in 0..n {
        for r in 0..w.rows {
            let (mut exact, mut mass) = (0f64, 0f64);
            for c in 0..w.cols {
                let p = wf[r * w.cols + c] as f64 * x[t * w.cols + c] as f64;
                exact += p;
                mass += p.abs();
            }
            exact += q8_1_sum_correction(w, r, &x[t * w.cols..(t + 1) * w.cols], raw[t]);
            let (g, cp) = (gpu[t * w.rows + r] as f64, cpu[t * w.rows + r] as f64);
            if mirrors_cpu_order(w.ty) {
                assert_eq!(
                    g.to_bits(),
                    cp.to_bits(),
                    "{what}: token {t} row {r}: gpu {g}, cpu {cp}: not bit-identical"
                );
            }
            assert!(
                (g - exact).abs() <= 1e-5 * mass + 1e-6,
                "{what}: token {t} row {r}: gpu {g}, exact {exact} (mass {mass})"
            );
            assert!(
                (g - cp).abs() <= 1e-2 * mass + 1e-6,
                "{what}: token {t} row {r}: gpu {g}, cpu {cp} (mass {mass})"
            );
        }
    }
}

fn product_case(ty: GgmlType, max_chunk_bytes: Option<u64>, matmul: MatMulKernel) {
    let mut rng = Rng::new(ty as u64 + 7);
    let cols = cols_for(ty);
    let rows = 67; // not a multiple of the 64-invocation workgroup
    let n_in = 16;
    let xs = rng.vec(n_in * cols, 1.0);
    let w = random_tensor(&mut rng, "w", ty, cols, rows);
    let tensors = [f32_tensor("x", cols, n_in, &xs), w];
    let opts = WgpuOptions {
        max_chunk_bytes,
        matmul: Some(matmul),
        ..Default::default()
    };
    let Some(mut p) = Pair::new(&tensors, opts) else {
        return;
    };
    let xw = p.load("x");
    let ww = p.load("w");
    if max_chunk_bytes.is_some() {
        assert!(
            p.gpu.weight_chunks(&ww) >= 2,
            "{ty}: the weight should be split"
        );
    }
    // 1 token (decode), 11 tokens (not a multiple of the 8-token tile) and 40 (prefill on
    // GPUs: more than two 16-token tiles, the last ragged), in shuffled order. With 67 rows
    // the tiled kernel's second 64-row tile is ragged.
    let long: Vec<u32> = (0..40)
        .map(|_| (rng.next_u64() % n_in as u64) as u32)
        .collect();
    for tokens in [vec![5u32], vec![3, 0, 15, 7, 7, 1, 9, 2, 12, 4, 11], long] {
        let n = tokens.len();
        let mut g = Graph::new(n);
        let x = g.embed(xw, 1.0);
        let y = g.matmul(ww, x);
        g.output(y);
        let (pos, seqs) = seq_positions(n);
        let out = p.run(&g, &tokens, &pos, &seqs);
        let xin: Vec<f32> = tokens
            .iter()
            .flat_map(|&t| xs[t as usize * cols..(t as usize + 1) * cols].to_vec())
            .collect();
        check_product(
            &format!("{ty} × {n} tokens ({matmul:?})"),
            &tensors[1],
            &xin,
            n,
            &out[0].0,
            &out[0].1,
        );
    }
    assert!(p.gpu.last_step_stats().dispatches >= 2);
}

#[test]
fn products_of_every_type_match() {
    for &ty in PRODUCT_TYPES {
        for k in [MatMulKernel::Cooperative, MatMulKernel::RowPerInvocation] {
            product_case(ty, None, k);
        }
    }
}

#[test]
fn products_of_split_weights_match() {
    // Chunks of at most 2 KiB (one activation row of 512 f32 fits): every weight is spread
    // over several buffers. Every type with the cooperative and tiled kernels (each chunk's
    // `row0` places its row tiles), a few with one row per invocation.
    for &ty in PRODUCT_TYPES {
        product_case(ty, Some(2048), MatMulKernel::Cooperative);
    }
    for &ty in &[GgmlType::Q4_0, GgmlType::Q6_K, GgmlType::F16] {
        product_case(ty, Some(2048), MatMulKernel::RowPerInvocation);
    }
}

#[test]
fn embeddings_of_every_type_match_exactly() {
    let mut rng = Rng::new(11);
    // Every type with a kernel dequantizer (the product types but the last).
    let tys = &PRODUCT_TYPES[..PRODUCT_TYPES.len() - 1];
    let tensors: Vec<TensorSpec> = tys
        .iter()
        .map(|&ty| random_tensor(&mut rng, &format!("{ty}"), ty, 256, 300))
        .collect();
    let opts = WgpuOptions {
        max_chunk_bytes: Some(8192),
        ..Default::default()
    };
    let Some(mut p) = Pair::new(&tensors, opts) else {
        return;
    };
    let tokens = [0u32, 299, 17, 150, 17, 64];
    let (pos, seqs) = seq_positions(tokens.len());
    for t in &tensors {
        let w = p.load(&t.name);
        assert!(
            p.gpu.weight_chunks(&w) >= 3,
            "{}: the table should be split",
            t.name
        );
        let mut g = Graph::new(tokens.len());
        let e = g.embed(w, 0.5);
        g.output(e);
        let out = p.run(&g, &tokens, &pos, &seqs);
        // Dequantization is the same arithmetic on both sides; allow only fused multiply-add
        // differences.
        assert_close(
            &format!("embed {}", t.name),
            &out[0].0,
            &out[0].1,
            1e-7,
            1e-6,
        );
    }
}

#[test]
fn norms_rope_and_elementwise_match() {
    let mut rng = Rng::new(3);
    let (cols, n_in, hd) = (192, 8, 64);
    let tensors = [
        f32_tensor("x", cols, n_in, &rng.vec(cols * n_in, 3.0)),
        f32_tensor("y", cols, n_in, &rng.vec(cols * n_in, 3.0)),
        f32_tensor("nw", cols, 1, &rng.vec(cols, 1.0)),
        f32_tensor("hw", hd, 1, &rng.vec(hd, 1.0)),
        f32_tensor("bias", cols, 1, &rng.vec(cols, 1.0)),
        f32_tensor(
            "ff",
            24,
            1,
            &(0..24).map(|i| 1.0 + i as f32 * 0.25).collect::<Vec<_>>(),
        ),
    ];
    let Some(mut p) = Pair::new(&tensors, WgpuOptions::default()) else {
        return;
    };
    let [xw, yw, nw, hw, bw, ffw] = ["x", "y", "nw", "hw", "bias", "ff"].map(|n| p.load(n));
    let tokens = [4u32, 0, 7, 2, 5];
    let n = tokens.len();
    let mut g = Graph::new(n);
    let x = g.embed(xw, 1.5);
    let y = g.embed(yw, 1.0);
    let mut outs = vec![
        // RMSNorm follows the CPU's f64 sum and correctly rounded sqrt and division.
        ("rms_norm", g.rms_norm(x, Some(nw), 1e-6, cols), 0.0),
        ("rms_norm per head", g.rms_norm(x, Some(hw), 1e-5, hd), 0.0),
        ("rms_norm no weight", g.rms_norm(x, None, 1e-6, cols), 0.0),
        (
            "layer_norm",
            g.layer_norm(x, Some(nw), Some(bw), 1e-5),
            1e-5,
        ),
        // The angles are formed identically (llama.cpp's recurrence); cos/sin may differ by
        // an ulp.
        ("rope neox", g.rope(x, hd, hd, 10000.0, true, None), 1e-5),
        (
            "rope normal partial",
            g.rope(x, hd, 32, 500000.0, false, None),
            1e-5,
        ),
        (
            "rope with factors",
            g.rope(x, hd, 48, 10000.0, true, Some(ffw)),
            1e-5,
        ),
        ("add", g.add(x, y), 1e-6),
        ("mul", g.mul(x, y), 1e-6),
        ("scale", g.scale(x, 0.125), 1e-6),
        ("soft_cap", g.soft_cap(x, 2.0), 1e-5),
        ("silu", g.silu(x), 1e-5),
        ("swiglu", g.swiglu(x, y), 1e-5),
        ("add_bias", g.add_bias(x, bw), 1e-6),
        ("softmax", g.softmax(x), 1e-5),
    ];
    // GELU looks up the CPU backend's own f16 table: bit-identical (checked below).
    let gelu = g.gelu(x);
    let geglu = g.geglu(x, y);
    outs.push(("gelu", gelu, 0.0));
    outs.push(("geglu", geglu, 0.0));
    for (_, t, _) in &outs {
        g.output(*t);
    }
    let positions = [0u32, 1, 17, 300, 4095];
    let seqs = [0u32; 5];
    let res = p.run(&g, &tokens, &positions, &seqs);
    for ((name, _, rel), (gpu, cpu)) in outs.iter().zip(&res) {
        if *rel == 0.0 {
            assert!(
                gpu.iter().zip(cpu).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name}: not bit-identical"
            );
        } else {
            assert_close(name, gpu, cpu, 1e-5, *rel);
        }
    }
    assert_eq!(p.gpu.last_step_stats().dispatches, 2 + outs.len());
}

/// RMSNorm over values spanning many binades (and a massive one, as Gemma 3's residual
/// stream holds), group sizes of the reference models: bit-identical to the CPU backend.
#[test]
fn rms_norm_is_bit_identical_over_wide_ranges() {
    let mut rng = Rng::new(11);
    let n_in = 6;
    for cols in [640usize, 576, 896, 1152] {
        let mut xs = Vec::with_capacity(cols * n_in);
        for i in 0..cols * n_in {
            let e = (rng.next_u64() % 40) as i32 - 30;
            let mut v = rng.f32() * 2f32.powi(e);
            if i % 397 == 5 {
                v = 275.0 + rng.f32();
            }
            xs.push(v);
        }
        let tensors = [
            f32_tensor("x", cols, n_in, &xs),
            f32_tensor("nw", cols, 1, &rng.vec(cols, 2.0)),
        ];
        let Some(mut p) = Pair::new(&tensors, WgpuOptions::default()) else {
            return;
        };
        let [xw, nw] = ["x", "nw"].map(|n| p.load(n));
        let tokens: Vec<u32> = (0..n_in as u32).collect();
        let mut g = Graph::new(n_in);
        let x = g.embed(xw, 1.0);
        let a = g.rms_norm(x, Some(nw), 1e-6, cols);
        let b = g.rms_norm(x, None, 1e-5, 64);
        g.output(a);
        g.output(b);
        let (pos, seqs) = seq_positions(n_in);
        for (k, (gpu, cpu)) in p.run(&g, &tokens, &pos, &seqs).iter().enumerate() {
            for (i, (a, b)) in gpu.iter().zip(cpu).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "cols {cols} output {k} element {i}: gpu {a}, cpu {b}"
                );
            }
        }
    }
}

#[test]
fn select_rows_and_top_k_match_with_ties() {
    let mut rng = Rng::new(5);
    let cols = 1024;
    let mut v = rng.vec(cols * 4, 1.0);
    // Row 1 has a three-way tie for the maximum and a tie further down.
    for &i in &[cols + 10, cols + 500, cols + 1023] {
        v[i] = 5.0;
    }
    v[cols + 20] = 4.0;
    v[cols + 21] = 4.0;
    let tensors = [f32_tensor("x", cols, 4, &v)];
    let Some(mut p) = Pair::new(&tensors, WgpuOptions::default()) else {
        return;
    };
    let xw = p.load("x");
    let tokens = [0u32, 1, 2, 3];
    let mut g = Graph::new(4);
    let x = g.embed(xw, 1.0);
    let s = g.select_rows(x, vec![3, 1]);
    let k1 = g.top_k(s, 1);
    let k8 = g.top_k(s, 8);
    g.output(s);
    g.output(k1);
    g.output(k8);
    let (pos, seqs) = seq_positions(4);
    let res = p.run(&g, &tokens, &pos, &seqs);
    assert_eq!(res[0].0, res[0].1, "select_rows");
    assert_eq!(res[1].0, res[1].1, "argmax");
    assert_eq!(res[2].0, res[2].1, "top-8");
    // Ids of row 1 (second selected row): the tie resolves to the lowest index first.
    assert_eq!(&res[2].0[8..13], &[10.0, 500.0, 1023.0, 20.0, 21.0]);
}

/// Attention over several steps: a prompt chunk, then decode rows of two sequences in one
/// batch; GQA (4 query heads on 2 key/value heads); one global layer and one sliding-window
/// layer whose ring buffer wraps.
fn attention_case(dtype: KvDtype) {
    let mut rng = Rng::new(9);
    let (n_head, n_kv, hd) = (4usize, 2usize, 64usize);
    let tensors = qkv_tensors(&mut rng, n_head, n_kv, hd, 64);
    let Some(mut p) = Pair::new(&tensors, WgpuOptions::default()) else {
        return;
    };
    let w = ["q", "k", "v"].map(|n| p.load(n));
    let window = 5;
    let max_batch = 9;
    let layer = |w: Option<usize>| KvLayerSpec {
        n_kv_head: n_kv,
        head_dim_k: hd,
        head_dim_v: hd,
        capacity: w.map_or(40, |w| w + max_batch),
        window: w,
    };
    let kv = p.kv(&KvCacheSpec {
        layers: vec![layer(None), layer(Some(window))],
        n_seq: 2,
        dtype,
        pool_blocks: None,
    });
    // (tokens, positions, seqs) per step.
    let steps: Vec<(Vec<u32>, Vec<u32>, Vec<u32>)> = vec![
        ((0..9).collect(), (0..9).collect(), vec![0; 9]),
        ((9..13).collect(), (0..4).collect(), vec![1; 4]),
        (vec![20, 30], vec![9, 4], vec![0, 1]),
        ((40..49).collect(), (10..19).collect(), vec![0; 9]),
        (vec![50, 51], vec![19, 5], vec![0, 1]),
    ];
    for (si, (tokens, pos, seqs)) in steps.iter().enumerate() {
        let g = attention_graph(tokens.len(), w, kv, 2, n_head, hd);
        let res = p.run(&g, tokens, pos, seqs);
        for (l, (gpu, cpu)) in res.iter().enumerate() {
            assert_attention_close(&format!("step {si} layer {l}"), dtype, gpu, cpu);
        }
    }
}

/// Bidirectional row ranges (an image's rows, which see each other both ways): every row of a
/// range attends up to the range's last position, the window still counted from its own. The
/// GPU matches the CPU, and the ranges change the output (they are not ignored).
fn bidirectional_case(dtype: KvDtype) {
    let mut rng = Rng::new(11);
    let (n_head, n_kv, hd) = (4usize, 2usize, 64usize);
    let tensors = qkv_tensors(&mut rng, n_head, n_kv, hd, 64);
    let Some(mut p) = Pair::new(&tensors, WgpuOptions::default()) else {
        return;
    };
    let w = ["q", "k", "v"].map(|n| p.load(n));
    let (window, max_batch) = (5, 9);
    let layer = |w: Option<usize>| KvLayerSpec {
        n_kv_head: n_kv,
        head_dim_k: hd,
        head_dim_v: hd,
        capacity: w.map_or(40, |w| w + max_batch),
        window: w,
    };
    let spec = KvCacheSpec {
        layers: vec![layer(None), layer(Some(window))],
        n_seq: 2,
        dtype,
        pool_blocks: None,
    };
    let kv = p.kv(&spec);
    // (tokens, positions, seqs, bidirectional row ranges) per step.
    type Step = (Vec<u32>, Vec<u32>, Vec<u32>, Vec<(u32, u32)>);
    let steps: Vec<Step> = vec![
        ((0..9).collect(), (0..9).collect(), vec![0; 9], vec![(2, 6)]),
        (
            (9..13).collect(),
            (0..4).collect(),
            vec![1; 4],
            vec![(0, 4)],
        ),
        (
            vec![20, 21, 22, 30],
            vec![9, 10, 11, 4],
            vec![0, 0, 0, 1],
            vec![(0, 3)],
        ),
    ];
    for (si, (tokens, pos, seqs, ranges)) in steps.iter().enumerate() {
        let mut g = attention_graph(tokens.len(), w, kv, 2, n_head, hd);
        g.bidirectional = ranges.clone();
        let res = p.run(&g, tokens, pos, seqs);
        for (l, (gpu, cpu)) in res.iter().enumerate() {
            assert_attention_close(
                &format!("bidirectional step {si} layer {l}"),
                dtype,
                gpu,
                cpu,
            );
        }
        // The same step, causal, in a fresh cache: the first row of each range differs.
        let causal = p.kv(&spec);
        for (t, q, s, _) in &steps[..si] {
            p.run(&attention_graph(t.len(), w, causal, 2, n_head, hd), t, q, s);
        }
        let g = attention_graph(tokens.len(), w, causal, 2, n_head, hd);
        let plain = p.run(&g, tokens, pos, seqs);
        let width = n_head * hd;
        let first = ranges[0].0 as usize * width;
        for ((gpu, _), (gpu_causal, _)) in res.iter().zip(&plain) {
            assert_ne!(
                gpu[first..first + width],
                gpu_causal[first..first + width],
                "step {si}: the range's first row sees no further than a causal row"
            );
        }
    }
}

#[test]
fn bidirectional_ranges_match_with_f16_cache() {
    bidirectional_case(KvDtype::F16);
}

#[test]
fn bidirectional_ranges_match_with_f32_cache() {
    bidirectional_case(KvDtype::F32);
}

/// Attention through scattered block tables: two sequences whose pool blocks interleave out
/// of order (one global layer through the tables, one sliding-window ring layer), prompts that
/// cross block boundaries, then decode rows of both in one batch. An unmapped position is an
/// error on both backends.
#[test]
fn attention_matches_through_scattered_block_tables() {
    let mut rng = Rng::new(11);
    let (n_head, n_kv, hd) = (4usize, 2usize, 64usize);
    let tensors = qkv_tensors(&mut rng, n_head, n_kv, hd, 256);
    let Some(mut p) = Pair::new(&tensors, WgpuOptions::default()) else {
        return;
    };
    let w = ["q", "k", "v"].map(|n| p.load(n));
    let window = 7;
    let max_batch = 80;
    let layer = |w: Option<usize>| KvLayerSpec {
        n_kv_head: n_kv,
        head_dim_k: hd,
        head_dim_v: hd,
        capacity: w.map_or(3 * KV_BLOCK, |w| w + max_batch),
        window: w,
    };
    let kv = p.kv(&KvCacheSpec {
        layers: vec![layer(None), layer(Some(window))],
        n_seq: 2,
        dtype: KvDtype::F16,
        pool_blocks: Some(5),
    });
    for (seq, table) in [(0u32, vec![4u32, 1, 3]), (1, vec![0, 2])] {
        p.cpu.set_block_table(kv, seq, &table).unwrap();
        p.gpu.set_block_table(kv, seq, &table).unwrap();
    }
    let steps: Vec<(Vec<u32>, Vec<u32>, Vec<u32>)> = vec![
        ((0..80).collect(), (0..80).collect(), vec![0; 80]),
        ((80..150).collect(), (0..70).collect(), vec![1; 70]),
        (vec![200, 201], vec![80, 70], vec![0, 1]),
        ((100..160).collect(), (81..141).collect(), vec![0; 60]),
        (vec![210, 211], vec![141, 71], vec![0, 1]),
    ];
    for (si, (tokens, pos, seqs)) in steps.iter().enumerate() {
        let g = attention_graph(tokens.len(), w, kv, 2, n_head, hd);
        let res = p.run(&g, tokens, pos, seqs);
        for (l, (gpu, cpu)) in res.iter().enumerate() {
            assert_attention_close(&format!("step {si} layer {l}"), KvDtype::F16, gpu, cpu);
        }
    }
    // Sequence 1 starts again from a copy of sequence 0's first 100 positions (through both
    // tables for the global layer; wrapping the ring for the sliding one), then attends.
    p.cpu.copy_prefix(kv, 0, 1, 100).unwrap();
    p.gpu.copy_prefix(kv, 0, 1, 100).unwrap();
    let (tokens, pos): (Vec<u32>, Vec<u32>) = ((220..224).collect(), (100..104).collect());
    let g = attention_graph(tokens.len(), w, kv, 2, n_head, hd);
    let res = p.run(&g, &tokens, &pos, &[1; 4]);
    for (l, (gpu, cpu)) in res.iter().enumerate() {
        assert_attention_close(&format!("after a copy, layer {l}"), KvDtype::F16, gpu, cpu);
    }
    // Onto itself, or past the tables: refused on both.
    assert!(p.cpu.copy_prefix(kv, 1, 1, 5).is_err());
    assert!(p.gpu.copy_prefix(kv, 1, 1, 5).is_err());
    assert!(p.cpu.copy_prefix(kv, 0, 1, 150).is_err());
    assert!(p.gpu.copy_prefix(kv, 0, 1, 150).is_err());
    // Sequence 1's third block is not mapped.
    let g = attention_graph(1, w, kv, 2, n_head, hd);
    let batch = StepBatch {
        tokens: &[5],
        positions: &[2 * KV_BLOCK as u32],
        seqs: &[1],
    };
    assert!(matches!(
        p.cpu.execute(&g, &batch),
        Err(BackendError::InvalidStep(_))
    ));
    assert!(matches!(
        p.gpu.execute(&g, &batch),
        Err(BackendError::InvalidStep(_))
    ));
    // A table naming a block outside the pool is refused.
    assert!(p.cpu.set_block_table(kv, 1, &[0, 5]).is_err());
    assert!(p.gpu.set_block_table(kv, 1, &[0, 5]).is_err());
}

#[test]
fn attention_matches_with_f16_cache() {
    attention_case(KvDtype::F16);
}

#[test]
fn attention_matches_with_f32_cache() {
    attention_case(KvDtype::F32);
}

#[test]
fn context_overflow_is_an_error_not_a_crash() {
    let tensors = [f32_tensor("k", 64, 2, &[0.5; 128])];
    let Some(mut p) = Pair::new(&tensors, WgpuOptions::default()) else {
        return;
    };
    let kw = p.load("k");
    let kv = p
        .gpu
        .create_kv_cache(&KvCacheSpec {
            layers: vec![KvLayerSpec {
                n_kv_head: 1,
                head_dim_k: 64,
                head_dim_v: 64,
                capacity: 4,
                window: None,
            }],
            n_seq: 1,
            dtype: KvDtype::F16,
            pool_blocks: None,
        })
        .unwrap();
    let mut g = Graph::new(1);
    let k = g.embed(kw, 1.0);
    let st = g.kv_store(kv, 0, k, k);
    let a = g.attention(k, st, kv, 0, 1, 64, 1.0);
    g.output(a);
    let batch = StepBatch {
        tokens: &[0],
        positions: &[4],
        seqs: &[0],
    };
    let e = p.gpu.execute(&g, &batch).unwrap_err();
    assert!(format!("{e}").contains("context holds 4"), "{e}");
}
