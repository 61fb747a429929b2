//! e^x, e^x − 1 and tanh on one f32 lane, written so that a loop of them vectorises: pure
//! arithmetic and bit operations, no libm call, no branch, no fused multiply-add (so every
//! build, AVX-512, AVX2, simd128 or none, gives the same bits).
//!
//! e^x = 2^n · e^r with n = round(x / ln 2) and r = x − n·ln 2 in [−ln 2 / 2, ln 2 / 2]; e^r − 1
//! by its Taylor series to r⁷ (truncation below 6e-9 relative), so a few ulp of rounding in all.

/// Lower clamp of the argument: 2^n stays a normal float (e^-87 ≈ 1.6e-38, against the true
/// value's underflow to 0 or a subnormal: negligible beside a softmax sum of at least 1).
pub(super) const EXP_LO: f32 = -87.0;
/// Upper clamp (e^88 ≈ 1.65e38, below f32::MAX; e^88.73 overflows).
pub(super) const EXP_HI: f32 = 88.0;
/// 1.5 · 2²³: adding it rounds a float of magnitude below 2²² to an integer, which then sits in
/// the low bits of the sum's mantissa.
pub(super) const ROUND: f32 = 12_582_912.0;
/// ln 2 in two parts: the high one has 9 significant bits, so n · LN2_HI is exact for |n| ≤ 127.
pub(super) const LN2_HI: f32 = 355.0 / 512.0;
pub(super) const LN2_LO: f32 = -2.121_944_4e-4;
/// 1/k! for k = 2..=7.
pub(super) const INV_FACT: [f32; 6] = [
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
];

/// `x` clamped to [EXP_LO, EXP_HI] and split as n·ln 2 + r: (2^n, r). NaN stays NaN (in r).
#[inline(always)]
fn reduce(x: f32) -> (f32, f32) {
    // Compare-and-select rather than f32::max/min, which would turn NaN into the bound.
    let x = if x < EXP_LO { EXP_LO } else { x };
    let x = if x > EXP_HI { EXP_HI } else { x };
    let t = x * std::f32::consts::LOG2_E + ROUND;
    let n = t - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    // n as an integer is t's bits minus ROUND's; 2^n's bits are (n + 127) << 23.
    let two_n = f32::from_bits(t.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127) << 23);
    (two_n, r)
}

/// e^r − 1 for |r| ≤ ln 2 / 2, without the cancellation of e^r then − 1.
#[inline(always)]
fn expm1_reduced(r: f32) -> f32 {
    let mut p = INV_FACT[5];
    for &c in INV_FACT[..5].iter().rev() {
        p = p * r + c;
    }
    (p * r + 1.0) * r
}

/// e^x within a few ulp for x in [−87, 88] (clamped outside; NaN stays NaN).
#[inline(always)]
pub(super) fn exp(x: f32) -> f32 {
    let (two_n, r) = reduce(x);
    (expm1_reduced(r) + 1.0) * two_n
}

/// e^x − 1 within a few ulp, small x included (2^n·(e^r − 1) + (2^n − 1): for |x| below
/// ln 2 / 2, n = 0 and it is the series alone).
#[inline(always)]
fn expm1(x: f32) -> f32 {
    let (two_n, r) = reduce(x);
    two_n * expm1_reduced(r) + (two_n - 1.0)
}

/// tanh y within a few ulp: for a = |y|, e = e^(−2a) − 1 in (−1, 0], tanh a = −e / (e + 2),
/// a quotient with no cancellation however small a is; the sign copied back from y.
#[inline(always)]
pub(super) fn tanh(y: f32) -> f32 {
    let e = expm1(-2.0 * y.abs());
    (-e / (e + 2.0)).copysign(y)
}

#[cfg(test)]
mod tests {
    /// Largest relative error against f64 over `xs` (where the f64 value is at least `floor`).
    fn worst(xs: impl Iterator<Item = f32>, f: fn(f32) -> f32, g: fn(f64) -> f64) -> f64 {
        xs.map(|x| {
            let want = g(x as f64);
            if want.abs() < 1e-37 {
                return 0.0;
            }
            (f(x) as f64 - want).abs() / want.abs()
        })
        .fold(0f64, f64::max)
    }

    #[test]
    fn exp_and_tanh_within_two_ulp() {
        let eps = f32::EPSILON as f64;
        let wide = || (0..8001).map(|i| -87.0 + i as f32 * 0.021_87);
        // Small arguments, where tanh's and expm1's cancellation would show.
        let small =
            || (1..4001).map(|i| (i as f32 * 1.7e-4).powi(3) * if i % 2 == 0 { 1.0 } else { -1.0 });
        let e = worst(wide(), super::exp, f64::exp);
        let t = worst(wide().chain(small()), super::tanh, f64::tanh);
        let m = worst(
            small().chain((0..200).map(|i| i as f32 * 0.1 - 10.0)),
            super::expm1,
            f64::exp_m1,
        );
        // Measured: exp 0.72, tanh 1.52, expm1 0.86 units of 2^-23 relative.
        assert!(
            e < 2.0 * eps && t < 2.0 * eps && m < 2.0 * eps,
            "exp {e:e} tanh {t:e} expm1 {m:e}"
        );
        assert_eq!(super::tanh(0.0), 0.0);
        assert_eq!(
            (super::tanh(-100.0), super::tanh(f32::INFINITY)),
            (-1.0, 1.0)
        );
        assert!(super::tanh(f32::NAN).is_nan() && super::exp(f32::NAN).is_nan());
    }
}
