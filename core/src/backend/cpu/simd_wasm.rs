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
}
