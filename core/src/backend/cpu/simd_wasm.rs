//! wasm simd128 forms of `simd.rs`'s f32 kernels (builds with `+simd128` only: wasm has no
//! run-time detection). Bit-identical to the portable lanes: the 16 accumulators are four
//! f32x4 registers, each step a multiply then an add (simd128 has no FMA, and the portable
//! code does not fuse either), the same sequential final sum and tail.

use core::arch::wasm32::*;

/// Four f32 at `x[i..i + 4]`.
#[inline(always)]
fn load4(x: &[f32], i: usize) -> v128 {
    let s = &x[i..i + 4];
    // SAFETY: `s` is 4 readable f32 (16 bytes); wasm loads need no alignment.
    unsafe { v128_load(s.as_ptr() as *const v128) }
}

/// Σ a[i]·b[i] over the shorter length, in the portable `dot_lanes` order.
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let full = n / 16 * 16;
    let mut acc = [f32x4_splat(0.0); 4];
    for base in (0..full).step_by(16) {
        for (k, s) in acc.iter_mut().enumerate() {
            let i = base + 4 * k;
            *s = f32x4_add(*s, f32x4_mul(load4(a, i), load4(b, i)));
        }
    }
    let mut tail = 0f32;
    for i in full..n {
        tail += a[i] * b[i];
    }
    let mut s = 0f32;
    for v in acc {
        s += f32x4_extract_lane::<0>(v);
        s += f32x4_extract_lane::<1>(v);
        s += f32x4_extract_lane::<2>(v);
        s += f32x4_extract_lane::<3>(v);
    }
    s + tail
}

/// y[i] += a·x[i] over the shorter length.
pub(super) fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    let n = y.len().min(x.len());
    let full = n / 4 * 4;
    let av = f32x4_splat(a);
    for i in (0..full).step_by(4) {
        let v = f32x4_add(load4(y, i), f32x4_mul(av, load4(x, i)));
        let out = &mut y[i..i + 4];
        // SAFETY: `out` is 4 writable f32.
        unsafe { v128_store(out.as_mut_ptr() as *mut v128, v) };
    }
    for i in full..n {
        y[i] += a * x[i];
    }
}

/// `x[i] = e^(x[i] − shift)` and Σ x[i], in the portable `exp_sum_lanes` order and operations
/// (the same clamps, multiply-then-add steps and bit arithmetic, four lanes at a time).
pub(super) fn exp_sum(x: &mut [f32], shift: f32) -> f32 {
    let n = x.len();
    let full = n / 16 * 16;
    let mut acc = [f32x4_splat(0.0); 4];
    for base in (0..full).step_by(16) {
        for (k, s) in acc.iter_mut().enumerate() {
            let i = base + 4 * k;
            let e = exp4(f32x4_sub(load4(x, i), f32x4_splat(shift)));
            let out = &mut x[i..i + 4];
            // SAFETY: `out` is 4 writable f32.
            unsafe { v128_store(out.as_mut_ptr() as *mut v128, e) };
            *s = f32x4_add(*s, e);
        }
    }
    let mut tail = 0f32;
    for v in &mut x[full..] {
        *v = super::math::exp(*v - shift);
        tail += *v;
    }
    let mut s = 0f32;
    for v in acc {
        s += f32x4_extract_lane::<0>(v);
        s += f32x4_extract_lane::<1>(v);
        s += f32x4_extract_lane::<2>(v);
        s += f32x4_extract_lane::<3>(v);
    }
    s + tail
}

/// `super::math::exp` on four lanes.
#[inline(always)]
fn exp4(x: v128) -> v128 {
    use super::math::{EXP_HI, EXP_LO, INV_FACT, LN2_HI, LN2_LO, ROUND};
    // pmax/pmin keep the first operand when the comparison fails: NaN stays NaN.
    let x = f32x4_pmax(x, f32x4_splat(EXP_LO));
    let x = f32x4_pmin(x, f32x4_splat(EXP_HI));
    let round = f32x4_splat(ROUND);
    let t = f32x4_add(f32x4_mul(x, f32x4_splat(std::f32::consts::LOG2_E)), round);
    let n = f32x4_sub(t, round);
    let r = f32x4_sub(
        f32x4_sub(x, f32x4_mul(n, f32x4_splat(LN2_HI))),
        f32x4_mul(n, f32x4_splat(LN2_LO)),
    );
    let mut p = f32x4_splat(INV_FACT[5]);
    for &c in INV_FACT[..5].iter().rev() {
        p = f32x4_add(f32x4_mul(p, r), f32x4_splat(c));
    }
    let one = f32x4_splat(1.0);
    p = f32x4_add(f32x4_mul(f32x4_add(f32x4_mul(p, r), one), r), one);
    let bits = i32x4_sub(t, i32x4_splat(ROUND.to_bits() as i32));
    let two_n = i32x4_shl(i32x4_add(bits, i32x4_splat(127)), 23);
    f32x4_mul(p, two_n)
}

/// The largest element, in the portable `max_lanes` order (NaNs passed over).
pub(super) fn max(x: &[f32]) -> f32 {
    let full = x.len() / 16 * 16;
    let mut acc = [f32x4_splat(f32::NEG_INFINITY); 4];
    for base in (0..full).step_by(16) {
        for (k, m) in acc.iter_mut().enumerate() {
            // pmax(a, b) is `a < b ? b : a`: the portable `c > acc ? c : acc`.
            *m = f32x4_pmax(*m, load4(x, base + 4 * k));
        }
    }
    let mut m = f32::NEG_INFINITY;
    let mut take = |v: f32| m = if v > m { v } else { m };
    for v in acc {
        take(f32x4_extract_lane::<0>(v));
        take(f32x4_extract_lane::<1>(v));
        take(f32x4_extract_lane::<2>(v));
        take(f32x4_extract_lane::<3>(v));
    }
    x[full..].iter().for_each(|&v| take(v));
    m
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    /// Odd lengths cover the 16-wide body, the 4-wide body and both tails.
    #[wasm_bindgen_test]
    fn simd128_dot_and_axpy_equal_portable_bits() {
        for n in [0usize, 1, 3, 4, 15, 16, 17, 64, 77, 130, 1000] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
            let b: Vec<f32> = (0..n + 2).map(|i| (i as f32 * 0.11).cos()).collect();
            let (fast, slow) = (super::dot(&a, &b), super::super::dot_lanes(&a, &b));
            assert_eq!(
                fast.to_bits(),
                slow.to_bits(),
                "dot n={n}: {fast} vs {slow}"
            );
            let (mut y1, mut y2) = (b.clone(), b.clone());
            super::axpy(&mut y1, 0.3, &a);
            super::super::axpy_lanes(&mut y2, 0.3, &a);
            let bits = |y: &[f32]| y.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&y1), bits(&y2), "axpy n={n}");
        }
    }

    /// exp_sum and max against the portable lanes, bit for bit, NaN and clamped values included.
    #[wasm_bindgen_test]
    fn simd128_exp_sum_and_max_equal_portable_bits() {
        for n in [0usize, 1, 3, 4, 15, 16, 17, 64, 77, 130, 1000] {
            let mut a: Vec<f32> = (0..n)
                .map(|i| (i as f32 * 0.37).sin() * 60.0 - 30.0)
                .collect();
            if n > 20 {
                a[5] = -200.0;
                a[17] = f32::NEG_INFINITY;
                a[19] = 95.0;
            }
            let (mut y1, mut y2) = (a.clone(), a.clone());
            let (s1, s2) = (
                super::exp_sum(&mut y1, 1.5),
                super::super::exp_sum_lanes(&mut y2, 1.5),
            );
            assert_eq!(s1.to_bits(), s2.to_bits(), "exp_sum n={n}: {s1} vs {s2}");
            let bits = |y: &[f32]| y.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&y1), bits(&y2), "exp n={n}");
            if n > 20 {
                a[7] = f32::NAN;
            }
            let (m1, m2) = (super::max(&a), super::super::max_lanes(&a));
            assert_eq!(m1.to_bits(), m2.to_bits(), "max n={n}");
        }
    }
}
