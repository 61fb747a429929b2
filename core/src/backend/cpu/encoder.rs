//! The ops encoders add (BERT-style embedding models, vision towers): table rows by position,
//! GELU with the error function, and pooling of a sequence's rows into one. Their bidirectional
//! attention within each sequence of a step is `encoder_attn.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::attention::SyncPtr;
use super::pool::ThreadPool;
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
    fn pooled_rows() {
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
        let mut pooled = vec![0.0; 4];
        pool_rows(&v, 2, &spans, PoolMode::Mean, &mut pooled);
        assert_eq!(pooled, vec![2.0, 3.0, 100.0, 200.0]);
        pool_rows(&v, 2, &spans[..1], PoolMode::Last, &mut pooled[..2]);
        assert_eq!(&pooled[..2], &[3.0, 4.0]);
        pool_rows(&v, 2, &spans[..1], PoolMode::First, &mut pooled[..2]);
        assert_eq!(&pooled[..2], &[1.0, 2.0]);
    }
}
