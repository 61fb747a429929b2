//! Micro-benchmark of token generation's matrix-vector product: GB/s of weight bytes through
//! the row kernels (`vec_dot_tile` with one activation row, as the CPU backend calls them),
//! on 1 and 2 threads, for weights streamed from memory (a 256 MiB matrix, larger than the
//! private caches) and for weights in cache (256 KiB); and, as the ceiling, a plain 2-thread
//! read of the same matrix. Best of several runs. Prints figures, asserts nothing about time:
//!   cargo test --release -p weft-core --test rows_bench -- --ignored --nocapture

use std::hint::black_box;
use std::time::Instant;

use weft_core::dtype::GgmlType;
use weft_core::quant::{self, dot};

/// Columns (Gemma 3 270M's embedding width).
const N: usize = 640;
const BIG: usize = 256 << 20;
const SMALL: usize = 256 << 10;

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

/// Best seconds of `runs` calls of `f`.
fn best(runs: usize, f: &dyn Fn()) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min)
}

/// Dots every row of `w` with `act` on `threads` threads (contiguous halves).
fn product(ty: GgmlType, w: &[u8], act: &[u8], row_bytes: usize, threads: usize) {
    let rows = w.len() / row_bytes;
    if threads == 1 {
        let mut out = vec![0f32; rows];
        for (c, o) in w.chunks(4096 * row_bytes).zip(out.chunks_mut(4096)) {
            dot::vec_dot_tile(ty, c, act, N, 1, o);
        }
        black_box(out);
        return;
    }
    std::thread::scope(|s| {
        for t in 0..threads {
            let (r0, r1) = (rows * t / threads, rows * (t + 1) / threads);
            let part = &w[r0 * row_bytes..r1 * row_bytes];
            s.spawn(move || {
                let mut out = vec![0f32; r1 - r0];
                // In chunks of 4096 rows, as the backend hands them out.
                for (c, o) in part.chunks(4096 * row_bytes).zip(out.chunks_mut(4096)) {
                    dot::vec_dot_tile(ty, c, act, N, 1, o);
                }
                black_box(out);
            });
        }
    });
}

/// A plain read of `w` on `threads` threads (sum of 8-byte words).
fn read_all(w: &[u8], threads: usize) {
    std::thread::scope(|s| {
        for t in 0..threads {
            let part = &w[w.len() * t / threads..w.len() * (t + 1) / threads];
            s.spawn(move || {
                let sum = part.chunks_exact(8).fold(0u64, |a, c| {
                    a.wrapping_add(u64::from_le_bytes(c.try_into().unwrap()))
                });
                black_box(sum);
            });
        }
    });
}

#[test]
#[ignore]
fn row_kernel_throughput() {
    let raw = random_bytes(BIG, 3);
    let gbs = |bytes: usize, secs: f64| bytes as f64 / secs / 1e9;
    for threads in [1, 2] {
        let secs = best(5, &|| read_all(&raw, threads));
        println!(
            "plain read, {threads} thread(s): {:6.2} GB/s",
            gbs(BIG, secs)
        );
    }
    for ty in [
        GgmlType::Q8_0,
        GgmlType::Q5_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
    ] {
        let row_bytes = ty.bytes_for(N as u64).unwrap() as usize;
        let rows = BIG / row_bytes;
        let x: Vec<f32> = (0..rows.min(1 << 16) * N)
            .map(|i| ((i * 37 % 1000) as f32 / 500.0) - 1.0)
            .collect();
        // Valid blocks (finite scales): quantize real values, repeated to fill the matrix.
        let unit = quant::quantize_to_vec(ty, &x).unwrap();
        let w: Vec<u8> = unit
            .iter()
            .copied()
            .cycle()
            .take(rows * row_bytes)
            .collect();
        let a: Vec<f32> = (0..N).map(|i| (i as f32 * 0.37).sin()).collect();
        let act = quant::quantize_to_vec(dot::vec_dot_type(ty), &a).unwrap();
        let small = &w[..SMALL / row_bytes * row_bytes];
        let cached = best(200, &|| product(ty, small, &act, row_bytes, 1));
        let mut line = format!(
            "{:>5}: cached 1 thread {:6.2} GB/s",
            ty.name(),
            gbs(small.len(), cached)
        );
        for threads in [1, 2] {
            let secs = best(4, &|| product(ty, &w, &act, row_bytes, threads));
            line += &format!(", stream {threads} thr {:6.2} GB/s", gbs(w.len(), secs));
        }
        println!("{line}");
    }
}
