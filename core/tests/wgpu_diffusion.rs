//! The diffusion-transformer ops on the wgpu backend against their CPU twins (random data), and
//! the CPU ones against plain loops: one row broadcast over every row (`add_row`, `mul_row`),
//! column slices, cross-attention over another row set, and Wan's 3-D rotary embedding.
//!
//! Tolerances: broadcasts and slices are exact (one rounding each, the same on both); the
//! rotation takes the same host-made cos / sin table on both and rounds its products apart, so
//! exact too; attention within 1e-5 (order of sums).

mod wgpu_support;

use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::wgpu::WgpuOptions;
use weft_core::backend::{Backend, Graph, MultiRope, SeqSpan, StepBatch};
use wgpu_support::{assert_close, data, Rng};

#[test]
fn diffusion_ops_match_plain_loops_and_the_cpu() {
    let mut rng = Rng::new(7);
    let (rows, cols) = (12usize, 48usize);
    let (n_head, hd) = (3usize, 16usize);
    let text_rows = 5usize;
    let x = rng.vec(rows * cols, 3.0);
    let row = rng.vec(cols, 2.0);
    let wide = rng.vec(rows * 3 * cols, 1.0);
    let kv = rng.vec(text_rows * cols, 2.0);
    let vv = rng.vec(text_rows * cols, 2.0);
    // A 2 x 2 x 3 token grid; head 16 = 4 frame pairs, 2 row pairs, 2 column pairs.
    let positions: Vec<[u32; 4]> = (0..rows as u32)
        .map(|t| [t / 6, t / 3 % 2, t % 3, 0])
        .collect();
    let positions: Arc<[[u32; 4]]> = positions.into();
    let sections = [4, 2, 2, 0];

    let mut g = Graph::new(rows);
    let xt = g.input(x.clone().into(), rows, cols);
    let rt = g.input(row.clone().into(), 1, cols);
    let wt = g.input(wide.clone().into(), rows, 3 * cols);
    let kt = g.input(kv.clone().into(), text_rows, cols);
    let vt = g.input(vv.clone().into(), text_rows, cols);
    let all = |n: usize| {
        vec![SeqSpan {
            start: 0,
            len: n as u32,
            valid: n as u32,
        }]
    };
    // The query rows in two spans over two key spans (the second with a padding row).
    let spans = vec![
        SeqSpan {
            start: 0,
            len: 7,
            valid: 7,
        },
        SeqSpan {
            start: 7,
            len: 5,
            valid: 5,
        },
    ];
    let keys = vec![
        SeqSpan {
            start: 0,
            len: 2,
            valid: 2,
        },
        SeqSpan {
            start: 2,
            len: 3,
            valid: 2,
        },
    ];
    let outs = [
        ("add_row", g.add_row(xt, rt), 0.0),
        ("mul_row", g.mul_row(xt, rt), 0.0),
        ("slice_cols", g.slice_cols(wt, cols + 5, cols), 0.0),
        (
            "video rope",
            g.rope_multi(
                xt,
                hd,
                hd,
                10000.0,
                sections,
                MultiRope::Video,
                positions.clone(),
            ),
            0.0,
        ),
        (
            "cross attention",
            g.cross_attention(
                xt,
                kt,
                vt,
                n_head,
                n_head,
                hd,
                0.25,
                all(rows),
                all(text_rows),
            ),
            1e-5,
        ),
        (
            "cross attention, two spans",
            g.cross_attention(xt, kt, vt, n_head, n_head, hd, 0.25, spans, keys),
            1e-5,
        ),
    ];
    for (_, t, _) in &outs {
        g.output(*t);
    }
    let tokens = vec![0u32; rows];
    let pos: Vec<u32> = (0..rows as u32).collect();
    let batch = StepBatch {
        tokens: &tokens,
        positions: &pos,
        seqs: &tokens,
    };
    let mut cpu = CpuBackend::new(2);
    let c: Vec<Vec<f32>> = cpu
        .execute(&g, &batch)
        .unwrap()
        .into_iter()
        .map(data)
        .collect();

    // The CPU against plain loops.
    let each = |f: &dyn Fn(usize, usize) -> f32| -> Vec<f32> {
        (0..rows * cols).map(|i| f(i / cols, i % cols)).collect()
    };
    assert_eq!(c[0], each(&|r, j| x[r * cols + j] + row[j]));
    assert_eq!(c[1], each(&|r, j| x[r * cols + j] * row[j]));
    assert_eq!(c[2], each(&|r, j| wide[r * 3 * cols + cols + 5 + j]));
    let rope = plain_video_rope(&x, cols, hd, &positions, sections);
    assert_close("video rope (CPU)", &c[3], &rope, 1e-6, 1e-6);
    let whole = plain_attention(&x, &kv, &vv, n_head, hd, 0.25, |_| 0..text_rows);
    assert_close("cross attention (CPU)", &c[4], &whole, 1e-6, 1e-6);
    let split = plain_attention(&x, &kv, &vv, n_head, hd, 0.25, |r| {
        if r < 7 {
            0..2
        } else {
            2..4
        }
    });
    assert_close(
        "cross attention, two spans (CPU)",
        &c[5],
        &split,
        1e-6,
        1e-6,
    );

    // wgpu against the CPU.
    let Some(mut gpu) = wgpu_support::backend(&WgpuOptions::default()) else {
        return;
    };
    let d = gpu.execute(&g, &batch).unwrap();
    for (((what, _, tol), c), d) in outs.iter().zip(&c).zip(d) {
        assert_close(what, &data(d), c, *tol, *tol);
    }
}

/// Wan's rotation of every head of every row: interleaved pairs, section `s`'s `j`-th pair
/// turned by `pos[s] / 10000^(2j / (2·sections[s]))`, formed in f64.
fn plain_video_rope(
    x: &[f32],
    cols: usize,
    hd: usize,
    positions: &[[u32; 4]],
    sections: [u32; 4],
) -> Vec<f32> {
    let mut out = x.to_vec();
    for (r, p) in positions.iter().enumerate() {
        let mut angles = Vec::new();
        for (s, &n) in sections.iter().enumerate() {
            for j in 0..n {
                let f = 1.0 / 10000f64.powf(2.0 * j as f64 / (2.0 * n as f64));
                angles.push(p[s] as f64 * f);
            }
        }
        for h in 0..cols / hd {
            for (i, &a) in angles.iter().enumerate() {
                let at = r * cols + h * hd + 2 * i;
                let (c, s) = (a.cos() as f32, a.sin() as f32);
                let (a0, a1) = (x[at], x[at + 1]);
                out[at] = a0 * c - a1 * s;
                out[at + 1] = a0 * s + a1 * c;
            }
        }
    }
    out
}

/// Softmax attention of each row of `q` over the key rows `keys(row)`, per head, in f64.
fn plain_attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    n_head: usize,
    hd: usize,
    scale: f32,
    keys: impl Fn(usize) -> std::ops::Range<usize>,
) -> Vec<f32> {
    let cols = n_head * hd;
    let rows = q.len() / cols;
    let mut out = vec![0f32; q.len()];
    for r in 0..rows {
        for h in 0..n_head {
            let qr = &q[r * cols + h * hd..r * cols + (h + 1) * hd];
            let scores: Vec<f64> = keys(r)
                .map(|j| {
                    let kj = &k[j * cols + h * hd..j * cols + (h + 1) * hd];
                    qr.iter()
                        .zip(kj)
                        .map(|(&a, &b)| a as f64 * b as f64)
                        .sum::<f64>()
                        * scale as f64
                })
                .collect();
            let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let sum: f64 = e.iter().sum();
            for d in 0..hd {
                out[r * cols + h * hd + d] = keys(r)
                    .zip(&e)
                    .map(|(j, w)| w / sum * v[j * cols + h * hd + d] as f64)
                    .sum::<f64>() as f32;
            }
        }
    }
    out
}
