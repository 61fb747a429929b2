//! Micro-benchmark of the dot kernels: GB/s of weight bytes processed by one thread doing a
//! matrix-vector product (every row dotted with one activation row), per type, for the SIMD
//! and scalar kernels: "stream" uses a 48 MiB matrix (weights come from memory, as in token
//! generation), "cached" a 256 KiB one (the kernel's own speed). Best of several runs, which
//! also filters out time lost to other processes. Plus activation quantization throughput.
//! Prints figures, asserts nothing about time. Run:
//!   cargo test --release -p weft-core --test quant_dot_bench -- --ignored --nocapture

use std::hint::black_box;
use std::time::Instant;

use weft_core::dtype::GgmlType;
use weft_core::quant::{self, dot};

const N: usize = 2048;
const MATRIX_BYTES: usize = 48 << 20; // larger than the caches: weights stream from memory

fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 32) as u8
        })
        .collect()
}

/// A matrix of valid blocks: random bits, then every block's f16 fields made finite by
/// quantizing random data where the type allows it, else by clearing the exponent bits' top.
fn matrix(ty: GgmlType, rows: usize) -> Vec<u8> {
    let n = rows * N;
    let x: Vec<f32> = random_bytes(n, 7)
        .iter()
        .map(|b| *b as f32 / 128.0 - 1.0)
        .collect();
    if quant::can_quantize(ty) {
        return quant::quantize_to_vec(ty, &x).unwrap();
    }
    // Random bits are valid blocks except for NaN/inf scales, which only change the result,
    // not the work done.
    random_bytes(ty.bytes_for(n as u64).unwrap() as usize, 11)
}

/// GB/s of `w` processed by `f` per row: best of `samples` timings of `passes` passes.
fn rate(
    w: &[u8],
    row_bytes: usize,
    passes: usize,
    samples: usize,
    f: &dyn Fn(&[u8]) -> f32,
) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..samples {
        let t = Instant::now();
        let mut s = 0f32;
        for _ in 0..passes {
            for r in w.chunks_exact(row_bytes) {
                s += f(black_box(r));
            }
        }
        black_box(s);
        best = best.min(t.elapsed().as_secs_f64());
    }
    (w.len() * passes) as f64 / best / 1e9
}

fn bench(ty: GgmlType) {
    let row_bytes = ty.bytes_for(N as u64).unwrap() as usize;
    let big = matrix(ty, MATRIX_BYTES / row_bytes);
    let small = &big[..(256 << 10) / row_bytes * row_bytes];
    let x: Vec<f32> = (0..N).map(|i| (i as f32 * 0.37).sin()).collect();
    let act = quant::quantize_to_vec(dot::vec_dot_type(ty), &x).unwrap();
    let fast = |r: &[u8]| dot::vec_dot(ty, r, &act, N);
    let slow = |r: &[u8]| dot::vec_dot_scalar(ty, r, &act, N);
    // Four activation rows at once (prompt processing): weight bytes x 4 per second.
    let acts: Vec<u8> = (0..4).flat_map(|_| act.iter().copied()).collect();
    let multi = |r: &[u8]| {
        let mut out = [0f32; 4];
        dot::vec_dot_multi(ty, r, &acts, N, &mut out);
        out[0] + out[3]
    };
    let stream = rate(&big, row_bytes, 1, 5, &fast);
    let cached = rate(small, row_bytes, 8, 60, &fast);
    let cached4 = 4.0 * rate(small, row_bytes, 2, 60, &multi);
    let scalar = rate(small, row_bytes, 2, 20, &slow);
    let simd = if dot::has_simd_kernel(ty) {
        "simd"
    } else {
        "scalar only"
    };
    println!(
        "{:>7} ({simd:>11}): stream {stream:6.2} GB/s, cached {cached:6.2} GB/s \
         ({:5.2} Gelem/s), 4 columns {cached4:6.2} GB/s; scalar kernel {scalar:5.2} GB/s",
        ty.name(),
        cached * N as f64 / row_bytes as f64,
    );
}

#[test]
#[ignore]
fn dot_throughput() {
    for ty in [
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
        GgmlType::Q4_1,
        GgmlType::Q4_0,
        GgmlType::Q5_1,
        GgmlType::Q5_K,
        GgmlType::Q3_K,
        GgmlType::Q2_K,
        GgmlType::IQ4_NL,
        GgmlType::IQ4_XS,
        GgmlType::F16,
        GgmlType::F32,
    ] {
        bench(ty);
    }
    let x: Vec<f32> = (0..1 << 20).map(|i| (i as f32 * 0.37).sin()).collect();
    for ty in [GgmlType::Q8_0, GgmlType::Q8_K, GgmlType::Q8_1] {
        let mut out = vec![0u8; ty.bytes_for(x.len() as u64).unwrap() as usize];
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            quant::quantize(ty, &x, &mut out).unwrap();
            best = best.min(t.elapsed().as_secs_f64());
        }
        black_box(&out);
        println!(
            "quantize activations to {}: {:.2} Gelem/s",
            ty.name(),
            x.len() as f64 / best / 1e9
        );
    }
}

/// G MAC/s of one thread doing a prompt-sized product (`ROWS` weight rows x `cols` x
/// `TOKENS` tokens, activations already quantized): the GEMM path (`GemmActs::prepare` once,
/// then `gemm_tile` per tile of rows) against the 4-token tile path (`vec_dot_tile` over
/// 16-row tiles, what the CPU backend used before). Best of several runs.
fn bench_gemm(ty: GgmlType, cols: usize) {
    const ROWS: usize = 256;
    const TOKENS: usize = 512;
    let row_bytes = ty.bytes_for(cols as u64).unwrap() as usize;
    let x: Vec<f32> = random_bytes(ROWS * cols, 3)
        .iter()
        .map(|b| *b as f32 / 128.0 - 1.0)
        .collect();
    let w = if quant::can_quantize(ty) {
        quant::quantize_to_vec(ty, &x).unwrap()
    } else {
        random_bytes(row_bytes * ROWS, 5)
    };
    let at = dot::vec_dot_type(ty);
    let acts: Vec<u8> = (0..TOKENS)
        .flat_map(|t| {
            let xt: Vec<f32> = (0..cols)
                .map(|i| ((i * 7 + t * 13) as f32 * 0.01).sin())
                .collect();
            quant::quantize_to_vec(at, &xt).unwrap()
        })
        .collect();
    let macs = (ROWS * cols * TOKENS) as f64;
    let best = |f: &mut dyn FnMut()| {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            f();
            best = best.min(t.elapsed().as_secs_f64());
        }
        macs / best / 1e9
    };
    let mut out = vec![0f32; 32 * TOKENS];
    let old = best(&mut || {
        for tile in w.chunks(16 * row_bytes) {
            let o = &mut out[..tile.len() / row_bytes * TOKENS];
            dot::vec_dot_tile(ty, tile, &acts, cols, TOKENS, o);
            black_box(&o);
        }
    });
    let mut layout = dot::GemmActs::new();
    let mut scratch = dot::GemmScratch::new();
    let gemm = if layout.prepare(ty, &acts, cols, TOKENS) {
        let rows = layout.tile_rows();
        let g = best(&mut || {
            layout.prepare(ty, &acts, cols, TOKENS);
            for tile in w.chunks(rows * row_bytes) {
                let o = &mut out[..tile.len() / row_bytes * TOKENS];
                dot::gemm_tile(&layout, tile, &mut scratch, o);
                black_box(&o);
            }
        });
        format!("{g:6.1} G MAC/s")
    } else {
        "  (no kernel)".to_string()
    };
    println!(
        "{:>7} {ROWS} rows x {cols} x {TOKENS} tokens: 4-token tiles {old:6.1} G MAC/s, \
         GEMM {gemm}",
        ty.name()
    );
}

#[test]
#[ignore]
fn gemm_throughput() {
    for (ty, cols) in [
        (GgmlType::Q5_0, 640),
        (GgmlType::Q8_0, 640),
        (GgmlType::Q4_0, 640),
        (GgmlType::Q4_1, 576),
        (GgmlType::Q4_K, 1024),
        (GgmlType::Q6_K, 2048),
    ] {
        bench_gemm(ty, cols);
    }
}
