//! Round-trip property tests of the quantizers, and input validation.
//!
//! Each format's bound is derived from how its scales are chosen (see each test). Data:
//! Gaussian values with per-block magnitudes spread over four decades, plus outliers and
//! all-zero blocks, at several lengths.

use super::*;
use crate::dtype::GgmlType;

/// A small deterministic generator (xorshift64*), so the tests need no extra crates.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Approximately standard normal (sum of 4 uniforms, rescaled).
    fn normal(&mut self) -> f32 {
        let s: f32 = (0..4).map(|_| self.uniform()).sum();
        (s - 2.0) * 1.732
    }
}

/// Test data: blocks of `block` values with magnitudes between 1e-3 and 10, a few outliers and
/// zero blocks.
fn sample(seed: u64, n: usize, block: usize) -> Vec<f32> {
    let mut rng = Rng(seed | 1);
    let mut x = vec![0f32; n];
    for chunk in x.chunks_mut(block) {
        let scale = 10f32.powf(rng.uniform() * 4.0 - 3.0);
        let kind = rng.next_u64() % 8;
        for v in chunk.iter_mut() {
            *v = match kind {
                0 => 0.0,
                1 => scale * rng.uniform(),  // all positive
                2 => -scale * rng.uniform(), // all negative
                _ => scale * rng.normal(),
            };
        }
        if kind == 3 {
            let i = (rng.next_u64() % chunk.len() as u64) as usize;
            chunk[i] *= 20.0;
        }
    }
    x
}

fn roundtrip(ty: GgmlType, x: &[f32]) -> Vec<f32> {
    let q = quantize_to_vec(ty, x).unwrap();
    dequantize_to_vec(ty, &q, x.len()).unwrap()
}

fn amax(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |a, v| a.max(v.abs()))
}

/// Checks |x - y| <= bound(block) for every element of every block of `group` elements.
fn check_bound(ty: GgmlType, group: usize, bound: impl Fn(&[f32]) -> f32) {
    for (seed, n) in [(1u64, 256usize), (2, 4096), (3, 256 * 37), (4, 512)] {
        let n = n / ty.block_size() * ty.block_size();
        let x = sample(seed, n, group);
        let y = roundtrip(ty, &x);
        for (bi, (xb, yb)) in x.chunks(group).zip(y.chunks(group)).enumerate() {
            let b = bound(xb);
            for (i, (a, r)) in xb.iter().zip(yb).enumerate() {
                assert!(
                    (a - r).abs() <= b,
                    "{ty} seed {seed}: block {bi} element {i}: x={a} y={r} err={} > bound {b}",
                    (a - r).abs()
                );
            }
        }
    }
}

/// Relative slack for f32 rounding of the products and an f16-rounded scale (2^-11 relative
/// per rounding; several roundings).
const F16_REL: f32 = 1.0 / 1024.0;

/// Half the spacing of f16 subnormals (2^-25): the absolute rounding error of a tiny scale,
/// multiplied by the largest quant in the bounds below.
const F16_ABS: f32 = 2.9802322e-8;

#[test]
fn q8_0_error_is_half_a_step() {
    // d = amax/127 (rounded to f16): error <= d/2, plus up to 127 * |d - f16(d)| from the
    // scale's rounding, i.e. amax * 2^-11.
    check_bound(GgmlType::Q8_0, 32, |b| {
        amax(b) * (0.5 / 127.0 + F16_REL) + 127.0 * F16_ABS
    });
}

#[test]
fn q8_1_error_is_half_a_step_and_sum_is_consistent() {
    check_bound(GgmlType::Q8_1, 32, |b| {
        amax(b) * (0.5 / 127.0 + F16_REL) + 127.0 * F16_ABS
    });
    let x = sample(9, 256, 32);
    let q = quantize_to_vec(GgmlType::Q8_1, &x).unwrap();
    for b in q.chunks(36) {
        let d = float::f16_at(b, 0);
        let s = float::f16_at(b, 2);
        let sum: i32 = b[4..].iter().map(|v| *v as i8 as i32).sum();
        assert!((s - d * sum as f32).abs() <= (d * sum as f32).abs() * F16_REL + F16_ABS);
    }
}

#[test]
fn q4_0_error_is_within_one_step() {
    // d = -max/8: the largest magnitude maps to -8 exactly; values of the other sign can reach
    // +8 and are clamped to 7, so the error is at most one step amax/8 (half a step elsewhere).
    check_bound(GgmlType::Q4_0, 32, |b| {
        amax(b) * (1.0 / 8.0 + F16_REL) + 8.0 * F16_ABS
    });
}

#[test]
fn q4_1_error_is_half_a_step() {
    // step = (max - min)/15 from the min: error <= step/2 plus the f16 rounding of min and d
    // (both relative to the block's magnitude).
    check_bound(GgmlType::Q4_1, 32, |b| {
        let (lo, hi) = b
            .iter()
            .fold((f32::MAX, f32::MIN), |(l, h), v| (l.min(*v), h.max(*v)));
        (hi - lo) / 30.0 + amax(b) * 16.0 * F16_REL + 16.0 * F16_ABS
    });
}

#[test]
fn q5_0_and_q5_1_errors() {
    check_bound(GgmlType::Q5_0, 32, |b| {
        amax(b) * (1.0 / 16.0 + F16_REL) + 16.0 * F16_ABS
    });
    check_bound(GgmlType::Q5_1, 32, |b| {
        let (lo, hi) = b
            .iter()
            .fold((f32::MAX, f32::MIN), |(l, h), v| (l.min(*v), h.max(*v)));
        (hi - lo) / 62.0 + amax(b) * 32.0 * F16_REL + 32.0 * F16_ABS
    });
}

#[test]
fn q8_k_error_is_half_a_step_and_bsums_match() {
    // d = amax/127 kept in f32: error <= d/2 (plus f32 rounding).
    check_bound(GgmlType::Q8_K, 256, |b| {
        amax(b) * (0.5 / 127.0) * (1.0 + 1e-5) + 1e-30
    });
    let x = sample(5, 1024, 256);
    let q = quantize_to_vec(GgmlType::Q8_K, &x).unwrap();
    for b in q.chunks(292) {
        for g in 0..16 {
            let sum: i32 = b[4 + g * 16..4 + g * 16 + 16]
                .iter()
                .map(|v| *v as i8 as i32)
                .sum();
            let stored = i16::from_le_bytes([b[260 + 2 * g], b[261 + 2 * g]]);
            assert_eq!(sum, stored as i32);
        }
    }
}

/// The f16 rounding up of a non-negative scale: at most one f16 ulp above it.
fn f16_up(x: f32) -> f32 {
    x * (1.0 + F16_REL) + 6.0e-8
}

/// The Q4_K covering bound of one super-block. Per sub-block j of 32: offset
/// o_j = -min(min_j, 0), range r_j = max_j + o_j. The covering encoder rounds the min scale up
/// (dmin <= f16_up(max o / 63)), so the stored offset m_j*dmin lies in [o_j, o_j + dmin]; the
/// needed step is s_j = (max_j + m_j*dmin)/15 <= (r_j + dmin)/15, rounded up to a multiple of
/// d <= f16_up(max s / 63). Nothing is clamped, so the error is at most half the stored step:
/// (s_j + d)/2.
fn q4_k_bound(b: &[f32]) -> f32 {
    let sub: Vec<(f32, f32)> = b
        .chunks(32)
        .map(|s| {
            let lo = s.iter().fold(0f32, |a, v| a.min(*v));
            let hi = s.iter().fold(lo, |a, v| a.max(*v));
            (-lo, hi - lo)
        })
        .collect();
    let dmin = f16_up(sub.iter().fold(0f32, |a, s| a.max(s.0)) / 63.0);
    let steps: Vec<f32> = sub.iter().map(|s| (s.1 + dmin) / 15.0).collect();
    let d = f16_up(steps.iter().fold(0f32, |a, v| a.max(*v)) / 63.0);
    let worst = steps.iter().fold(0f32, |a, v| a.max(*v));
    0.5 * (worst + d) * (1.0 + 1e-5) + amax(b) * 1e-6 + 1e-30
}

#[test]
fn q4_k_covering_error_is_half_a_rounded_up_step() {
    for (seed, n) in [(1u64, 256usize), (2, 4096), (3, 256 * 37)] {
        let x = sample(seed, n, 256);
        for (bi, xb) in x.chunks(256).enumerate() {
            let mut block = [0u8; 144];
            kquant_quantize::covering_q4_k(xb, &mut block);
            let y = dequantize_to_vec(GgmlType::Q4_K, &block, 256).unwrap();
            let bound = q4_k_bound(xb);
            for (i, (a, r)) in xb.iter().zip(&y).enumerate() {
                assert!((a - r).abs() <= bound, "seed {seed} block {bi} element {i}");
            }
        }
    }
}

#[test]
fn q4_k_weighted_rms_error_is_within_the_covering_bound() {
    // quant_q4_k keeps the covering encoding unless the fitted one has a lower weighted squared
    // error, so its weighted RMS error is within the covering bound. On Gaussian data the
    // fitted encoding must win clearly, else the search is broken.
    let mut sse = [0f64; 2];
    for (seed, n) in [(1u64, 256usize), (2, 4096), (3, 256 * 37)] {
        let x = sample(seed, n, 256);
        let y = roundtrip(GgmlType::Q4_K, &x);
        for (xb, yb) in x.chunks(256).zip(y.chunks(256)) {
            let w = kquant_quantize::importance(xb);
            let (num, den) = xb
                .iter()
                .zip(yb)
                .zip(&w)
                .fold((0f64, 0f64), |(n, d), ((a, r), w)| {
                    (n + *w as f64 * ((a - r) as f64).powi(2), d + *w as f64)
                });
            let rms = if den > 0.0 { (num / den).sqrt() } else { 0.0 };
            assert!(rms <= q4_k_bound(xb) as f64, "weighted rms {rms}");
            let mut cover = [0u8; 144];
            kquant_quantize::covering_q4_k(xb, &mut cover);
            let mut best = [0u8; 144];
            quantize(GgmlType::Q4_K, xb, &mut best).unwrap();
            sse[0] += kquant_quantize::weighted_sse(&best, xb, &w) / den.max(1e-30);
            sse[1] += kquant_quantize::weighted_sse(&cover, xb, &w) / den.max(1e-30);
        }
    }
    eprintln!(
        "Q4_K relative weighted squared error: chosen / covering = {}",
        sse[0] / sse[1]
    );
    assert!(sse[0] < 0.9 * sse[1], "fitting gained too little: {sse:?}");
}

#[test]
fn q6_k_error_is_half_a_rounded_up_step() {
    // Per sub-block of 16: ideal step s_j = amax_j/31, so no value leaves -31..=31; d =
    // f16_up(max s / 127) and each scale is rounded up, so the stored step is <= s_j + d and
    // nothing is clamped: error <= (s_j + d)/2. The bound below uses the super-block's worst s.
    check_bound(GgmlType::Q6_K, 256, |b| {
        let worst = b.chunks(16).map(amax).fold(0f32, f32::max) / 31.0;
        let d = f16_up(worst / 127.0);
        0.5 * (worst + d) * (1.0 + 1e-5) + 1e-30
    });
}

#[test]
fn k_quant_steps_follow_each_sub_block() {
    // The per-sub-block scales matter: a block mixing tiny and large sub-blocks must keep the
    // tiny ones accurate (error well below the large sub-block's step).
    let mut x = vec![0f32; 256];
    for (i, v) in x.iter_mut().enumerate() {
        let big = if i < 128 { 1.0 } else { 0.01 };
        *v = big * ((i * 37 % 17) as f32 / 8.0 - 1.0);
    }
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
        let y = roundtrip(ty, &x);
        let err = x[128..]
            .iter()
            .zip(&y[128..])
            .fold(0f32, |a, (p, q)| a.max((p - q).abs()));
        assert!(err < 0.01, "{ty}: small sub-blocks lost precision: {err}");
    }
}

#[test]
fn floats_round_trip() {
    let x = sample(7, 300, 10);
    assert_eq!(roundtrip(GgmlType::F32, &x), x);
    for (ty, rel) in [(GgmlType::F16, 1.0 / 2048.0), (GgmlType::BF16, 1.0 / 256.0)] {
        for (a, b) in x.iter().zip(roundtrip(ty, &x)) {
            // F16 loses precision below its normal range (6.1e-5): allow its subnormal step.
            assert!((a - b).abs() <= a.abs() * rel + 6.0e-8, "{ty}: {a} -> {b}");
        }
    }
}

#[test]
fn bad_lengths_and_types_are_errors() {
    let mut out = vec![0f32; 32];
    assert!(matches!(
        dequantize(GgmlType::Q4_0, &[0u8; 17], &mut out),
        Err(QuantError::WrongByteLen {
            expected: 18,
            got: 17,
            ..
        })
    ));
    assert!(matches!(
        dequantize(GgmlType::Q4_K, &[0u8; 144], &mut out),
        Err(QuantError::NotWholeBlocks { .. })
    ));
    assert!(matches!(
        dequantize(GgmlType::IQ2_XXS, &[0u8; 66], &mut vec![0f32; 256]),
        Err(QuantError::DequantUnsupported(GgmlType::IQ2_XXS))
    ));
    assert!(matches!(
        quantize(GgmlType::Q2_K, &[0f32; 256], &mut [0u8; 84]),
        Err(QuantError::QuantUnsupported(GgmlType::Q2_K))
    ));
    assert!(quantize_to_vec(GgmlType::Q8_0, &[0f32; 33]).is_err());
    // A huge element count from a bad header is refused before anything is allocated.
    assert!(dequantize_to_vec(GgmlType::Q8_0, &[0u8; 34], usize::MAX / 64 * 32).is_err());
    for ty in [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::Q8_K,
    ] {
        assert!(can_quantize(ty) && is_supported(ty), "{ty}");
    }
}

#[test]
fn round_half_away_matches_f32_round() {
    let mut rng = Rng(99);
    let mut values = vec![
        0.5f32,
        -0.5,
        1.5,
        -1.5,
        2.5,
        0.49999997,
        -0.49999997,
        127.5,
        -0.0,
    ];
    values.extend((0..100_000).map(|_| rng.normal() * 100.0));
    values.extend((0..1000).map(|i| i as f32 / 2.0 - 250.0));
    for v in values {
        assert_eq!(float::round_half_away(v), v.round() as i32, "{v}");
    }
}

#[test]
fn f16_widening_is_exact_for_every_value() {
    for h in 0..=u16::MAX {
        let ours = float::f16_bits_to_f32(h);
        let reference = half::f16::from_bits(h).to_f32();
        if reference.is_nan() {
            // NaNs keep sign and payload bits, as numpy's conversion does.
            let expect = ((h as u32 & 0x8000) << 16) | 0x7f80_0000 | ((h as u32 & 0x3ff) << 13);
            assert_eq!(ours.to_bits(), expect, "{h:#06x}");
        } else {
            assert_eq!(ours.to_bits(), reference.to_bits(), "{h:#06x}");
        }
    }
}
