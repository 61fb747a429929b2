//! The ops encoders add (BERT-style embedding models): table rows by position, GELU with the
//! error function, bidirectional attention within each sequence of a step, and pooling of a
//! sequence's rows into one.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::attention::SyncPtr;
use super::gemm_f32;
use super::pool::ThreadPool;
use super::simd;
use crate::backend::{BackendError, PoolMode, Result, SeqSpan};

/// The error function, Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7), in f32.
/// The wgpu backend's `erf` (elementwise.wgsl) is the same expression.
#[inline]
pub fn erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_7,
        -1.453_152,
        1.061_405_4,
    ];
    let a = x.abs();
    let t = 1.0 / (1.0 + P * a);
    let poly = ((((A[4] * t + A[3]) * t + A[2]) * t + A[1]) * t + A[0]) * t;
    let y = 1.0 - poly * (-a * a).exp();
    if x < 0.0 {
        -y
    } else {
        y
    }
}

/// GELU as BERT defines it: `x · Φ(x) = x/2 · (1 + erf(x/√2))`.
#[inline]
pub fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// `out = gelu_erf(x)`, split across the pool (an encoder's feed-forward activations are the
/// largest element-wise op of its step).
pub fn gelu_erf_all(pool: &ThreadPool, x: &[f32], out: &mut [f32]) {
    const CHUNK: usize = 16 * 1024;
    let n = x.len();
    let chunks = n.div_ceil(CHUNK);
    let out_ptr = SyncPtr(out.as_mut_ptr());
    let next = AtomicUsize::new(0);
    let job = |_: usize| {
        let out_ptr = &out_ptr;
        loop {
            let c = next.fetch_add(1, Ordering::Relaxed);
            if c >= chunks {
                break;
            }
            let r = c * CHUNK..((c + 1) * CHUNK).min(n);
            // SAFETY: each chunk of `out` is written by exactly one thread.
            let o = unsafe { std::slice::from_raw_parts_mut(out_ptr.0.add(r.start), r.len()) };
            for (o, &v) in o.iter_mut().zip(&x[r]) {
                *o = gelu_erf(v);
            }
        }
    };
    if chunks <= 1 {
        job(0);
    } else {
        pool.run(&job);
    }
}

/// The step rows' table indices for a row lookup by position, checked against the table.
pub fn position_rows(positions: &[u32], table_rows: usize) -> Result<&[u32]> {
    match positions.iter().find(|&&p| p as usize >= table_rows) {
        Some(p) => Err(BackendError::InvalidStep(format!(
            "position {p} is past the model's {table_rows} learned positions"
        ))),
        None => Ok(positions),
    }
}

/// Shapes of one [`encoder_attention`] call.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub scale: f32,
}

/// Bidirectional attention within each span (see `Op::EncoderAttention`). `q` is
/// `rows × n_head·head_dim`, `k` and `v` are `rows × n_head_kv·head_dim`. Work items are
/// (span, head) pairs taken from a shared counter; where the f32 GEMM kernel runs, an item is
/// two small products (queries × keys, then weights × values) instead of a dot product per
/// (query, key) pair, which profiling showed as the largest cost after the weight products.
pub fn encoder_attention(
    pool: &ThreadPool,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    s: AttnShape,
    spans: &[SeqSpan],
    out: &mut [f32],
) {
    let qc = s.n_head * s.head_dim;
    let items = spans.len() * s.n_head;
    let out_ptr = SyncPtr(out.as_mut_ptr());
    let next = AtomicUsize::new(0);
    let gemm = gemm_f32::available();
    let job = |_: usize| {
        let out_ptr = &out_ptr;
        let mut scratch = Scratch::default();
        loop {
            let item = next.fetch_add(1, Ordering::Relaxed);
            if item >= items {
                break;
            }
            let (span, h) = (&spans[item / s.n_head], item % s.n_head);
            let it = Item {
                q,
                k,
                v,
                s,
                span,
                h,
            };
            let mut write = |r: usize, row: &[f32]| {
                // SAFETY: row r, head h of `out` belongs to this work item alone.
                let o = unsafe {
                    std::slice::from_raw_parts_mut(
                        out_ptr.0.add(r * qc + h * s.head_dim),
                        row.len(),
                    )
                };
                o.copy_from_slice(row);
            };
            if gemm {
                it.products(&mut scratch, &mut write);
            } else {
                it.dots(&mut scratch, &mut write);
            }
        }
    };
    if items <= 1 {
        job(0);
    } else {
        pool.run(&job);
    }
}

/// Buffers one thread reuses across its work items.
#[derive(Default)]
struct Scratch {
    queries: Vec<f32>,
    scores: Vec<f32>,
    acc: Vec<f32>,
}

/// One (span, head) work item of [`encoder_attention`].
struct Item<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    s: AttnShape,
    span: &'a SeqSpan,
    h: usize,
}

impl Item<'_> {
    /// Query width, key/value width, and the offset of this head's key/value columns.
    fn widths(&self) -> (usize, usize, usize) {
        let s = &self.s;
        let kh = self.h / (s.n_head / s.n_head_kv);
        (
            s.n_head * s.head_dim,
            s.n_head_kv * s.head_dim,
            kh * s.head_dim,
        )
    }

    /// This head's query columns of row `r`.
    fn query(&self, r: usize) -> &[f32] {
        let (qc, hd) = (self.widths().0, self.s.head_dim);
        &self.q[r * qc + self.h * hd..r * qc + (self.h + 1) * hd]
    }

    /// Two GEMM-kernel products: scores = (scale·Q)·Kᵀ, softmax by row, out = P·V.
    fn products(&self, buf: &mut Scratch, write: &mut impl FnMut(usize, &[f32])) {
        let (hd, (_, kc, kv)) = (self.s.head_dim, self.widths());
        let span = self.span;
        let (start, len, valid) = (span.start as usize, span.len as usize, span.valid as usize);
        let keys = &self.k[start * kc + kv..];
        let keys = gemm_f32::pack_strided(keys, valid, hd, kc, self.s.scale);
        let values = gemm_f32::pack_transposed(&self.v[start * kc + kv..], valid, hd, kc);
        buf.queries.clear();
        for r in start..start + len {
            buf.queries.extend_from_slice(self.query(r));
        }
        buf.scores.resize(len * valid, 0.0);
        gemm_f32::product_serial(&keys, &buf.queries, len, &mut buf.scores, valid);
        for row in buf.scores.chunks_exact_mut(valid) {
            softmax_in_place(row);
        }
        buf.acc.resize(len * hd, 0.0);
        gemm_f32::product_serial(&values, &buf.scores, len, &mut buf.acc, hd);
        for (i, row) in buf.acc.chunks_exact(hd).enumerate() {
            write(start + i, row);
        }
    }

    /// A dot product per (query, key) pair (CPUs without the GEMM kernel).
    fn dots(&self, buf: &mut Scratch, write: &mut impl FnMut(usize, &[f32])) {
        let (hd, (_, kc, kv)) = (self.s.head_dim, self.widths());
        let (start, valid) = (self.span.start as usize, self.span.valid as usize);
        fn row(m: &[f32], at: usize, hd: usize) -> &[f32] {
            &m[at..at + hd]
        }
        let at = |j: usize| (start + j) * kc + kv;
        buf.scores.resize(valid, 0.0);
        buf.acc.resize(hd, 0.0);
        for r in start..start + self.span.len as usize {
            let qr = self.query(r);
            for (j, sc) in buf.scores.iter_mut().enumerate() {
                *sc = simd::dot(qr, row(self.k, at(j), hd)) * self.s.scale;
            }
            softmax_in_place(&mut buf.scores);
            buf.acc.iter_mut().for_each(|a| *a = 0.0);
            for (j, &p) in buf.scores.iter().enumerate() {
                simd::axpy(&mut buf.acc, p, row(self.v, at(j), hd));
            }
            write(r, &buf.acc);
        }
    }
}

/// `row = exp(row - max) / Σ`.
fn softmax_in_place(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for x in row.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    let inv = 1.0 / sum;
    row.iter_mut().for_each(|x| *x *= inv);
}

/// One row per span: the mean, first or last of its valid rows of `x` (`cols` wide).
pub fn pool_rows(x: &[f32], cols: usize, spans: &[SeqSpan], mode: PoolMode, out: &mut [f32]) {
    for (o, s) in out.chunks_exact_mut(cols).zip(spans) {
        let row = |r: usize| &x[r * cols..(r + 1) * cols];
        let (start, valid) = (s.start as usize, s.valid as usize);
        match mode {
            PoolMode::First => o.copy_from_slice(row(start)),
            PoolMode::Last => o.copy_from_slice(row(start + valid - 1)),
            PoolMode::Mean => {
                o.iter_mut().for_each(|v| *v = 0.0);
                for r in start..start + valid {
                    for (a, &b) in o.iter_mut().zip(row(r)) {
                        *a += b;
                    }
                }
                let inv = 1.0 / valid as f32;
                o.iter_mut().for_each(|v| *v *= inv);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // erf(0.5), erf(1), erf(2) to 7 digits.
        for (x, want) in [
            (0.5f32, 0.520_499_9),
            (1.0, 0.842_700_8),
            (2.0, 0.995_322_3),
        ] {
            assert!((erf(x) - want).abs() < 2e-7, "erf({x})");
            assert!((erf(-x) + want).abs() < 2e-7, "erf(-{x})");
        }
        assert!((gelu_erf(1.0) - 0.841_344_7).abs() < 1e-6);
    }

    #[test]
    fn products_and_dots_agree() {
        if !gemm_f32::available() {
            return;
        }
        // Two heads sharing one key/value head, head width 40 (not a multiple of 32), a span of
        // 37 rows of which 29 are valid (padding after them), starting at row 3.
        let s = AttnShape {
            n_head: 2,
            n_head_kv: 1,
            head_dim: 40,
            scale: 0.15,
        };
        let n = 45;
        let fill = |len: usize, m: usize| -> Vec<f32> {
            (0..len)
                .map(|i| ((i * m % 97) as f32 - 48.0) / 24.0)
                .collect()
        };
        let (q, k, v) = (fill(n * 80, 31), fill(n * 40, 17), fill(n * 40, 23));
        let span = SeqSpan {
            start: 3,
            len: 37,
            valid: 29,
        };
        let run = |products: bool| {
            let mut out = vec![0f32; n * 80];
            let mut buf = Scratch::default();
            for h in 0..2 {
                let mut write = |r: usize, row: &[f32]| {
                    out[r * 80 + h * 40..r * 80 + (h + 1) * 40].copy_from_slice(row)
                };
                let it = Item {
                    q: &q,
                    k: &k,
                    v: &v,
                    s,
                    span: &span,
                    h,
                };
                if products {
                    it.products(&mut buf, &mut write);
                } else {
                    it.dots(&mut buf, &mut write);
                }
            }
            out
        };
        let (a, b) = (run(true), run(false));
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-5, "largest difference {worst}");
        assert!(
            a[..3 * 80].iter().all(|&x| x == 0.0),
            "rows before the span are untouched"
        );
    }

    #[test]
    fn attention_within_spans_only() {
        // Two spans of one head of width 2: a row's output is a mix of its own span's values.
        let pool = ThreadPool::new(2);
        let q = vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let k = q.clone();
        let v = vec![1.0, 2.0, 3.0, 4.0, 100.0, 200.0];
        let spans = [
            SeqSpan {
                start: 0,
                len: 2,
                valid: 2,
            },
            SeqSpan {
                start: 2,
                len: 1,
                valid: 1,
            },
        ];
        let shape = AttnShape {
            n_head: 1,
            n_head_kv: 1,
            head_dim: 2,
            scale: 1.0,
        };
        let mut out = vec![0.0; 6];
        encoder_attention(&pool, &q, &k, &v, shape, &spans, &mut out);
        // Span 2 has one row: its output is its own value.
        assert_eq!(&out[4..], &[100.0, 200.0]);
        // Row 0 weighs row 0 by e^1 and row 1 by e^0.
        let w0 = 1f32.exp() / (1f32.exp() + 1.0);
        assert!((out[0] - (w0 * 1.0 + (1.0 - w0) * 3.0)).abs() < 1e-6);
        let mut pooled = vec![0.0; 4];
        pool_rows(&v, 2, &spans, PoolMode::Mean, &mut pooled);
        assert_eq!(pooled, vec![2.0, 3.0, 100.0, 200.0]);
        pool_rows(&v, 2, &spans[..1], PoolMode::Last, &mut pooled[..2]);
        assert_eq!(&pooled[..2], &[3.0, 4.0]);
    }
}
