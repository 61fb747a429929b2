//! f32 vector kernels used by attention and the element-wise ops, with runtime selection of an
//! AVX2 (and, for the exponential, AVX-512) build of the same code on x86-64. The portable form
//! keeps 16 independent accumulators so the compiler can vectorise it without reordering a
//! single running sum; every build gives the same bits (no fused multiply-adds anywhere).

#[path = "simd_math.rs"]
mod math;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[path = "simd_wasm.rs"]
mod simd_wasm;

#[cfg_attr(
    all(target_arch = "wasm32", target_feature = "simd128"),
    allow(dead_code)
)]
#[inline(always)]
fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; 16];
    let mut ca = a.chunks_exact(16);
    let mut cb = b.chunks_exact(16);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..16 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut tail = 0f32;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += x * y;
    }
    let mut s = 0f32;
    for v in acc {
        s += v;
    }
    s + tail
}

#[cfg_attr(
    all(target_arch = "wasm32", target_feature = "simd128"),
    allow(dead_code)
)]
#[inline(always)]
fn axpy_lanes(y: &mut [f32], a: f32, x: &[f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    dot_lanes(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn axpy_avx2(y: &mut [f32], a: f32, x: &[f32]) {
    axpy_lanes(y, a, x)
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

/// Σ a[i]·b[i] over the shorter length.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU supports the features the function was compiled for.
        return unsafe { dot_avx2(a, b) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd_wasm::dot(a, b);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    dot_lanes(a, b)
}

/// y[i] += a·x[i].
#[inline]
pub fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: as above.
        return unsafe { axpy_avx2(y, a, x) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd_wasm::axpy(y, a, x);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    axpy_lanes(y, a, x)
}

/// `x[i] = e^(x[i] − shift)`, returning Σ x[i] (16 lane sums added in order, then the tail).
#[cfg_attr(
    all(target_arch = "wasm32", target_feature = "simd128"),
    allow(dead_code)
)]
#[inline(always)]
fn exp_sum_lanes(x: &mut [f32], shift: f32) -> f32 {
    let mut acc = [0f32; 16];
    let mut chunks = x.chunks_exact_mut(16);
    for c in &mut chunks {
        for i in 0..16 {
            c[i] = math::exp(c[i] - shift);
            acc[i] += c[i];
        }
    }
    let mut tail = 0f32;
    for v in chunks.into_remainder() {
        *v = math::exp(*v - shift);
        tail += *v;
    }
    let mut s = 0f32;
    for v in acc {
        s += v;
    }
    s + tail
}

/// `out[i] = cap · tanh(x[i] / cap)` over the shorter length.
#[inline(always)]
fn soft_cap_lanes(out: &mut [f32], x: &[f32], cap: f32) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = cap * math::tanh(v / cap);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn soft_cap_avx512(out: &mut [f32], x: &[f32], cap: f32) {
    soft_cap_lanes(out, x, cap)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn soft_cap_avx2(out: &mut [f32], x: &[f32], cap: f32) {
    soft_cap_lanes(out, x, cap)
}

/// The largest element (−∞ for none; NaNs are passed over), 16 lanes.
#[cfg_attr(
    all(target_arch = "wasm32", target_feature = "simd128"),
    allow(dead_code)
)]
#[inline(always)]
fn max_lanes(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 16];
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        for i in 0..16 {
            acc[i] = if c[i] > acc[i] { c[i] } else { acc[i] };
        }
    }
    let mut m = f32::NEG_INFINITY;
    for &v in acc.iter().chain(chunks.remainder()) {
        m = if v > m { v } else { m };
    }
    m
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn exp_sum_avx512(x: &mut [f32], shift: f32) -> f32 {
    exp_sum_lanes(x, shift)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_sum_avx2(x: &mut [f32], shift: f32) -> f32 {
    exp_sum_lanes(x, shift)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn max_avx512(x: &[f32]) -> f32 {
    max_lanes(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn max_avx2(x: &[f32]) -> f32 {
    max_lanes(x)
}

#[cfg(target_arch = "x86_64")]
fn has_avx512() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx512f"))
}

/// `x[i] = e^(x[i] − shift)` (a few ulp from the exact value; arguments below −87 give e^−87),
/// returning Σ x[i]: a softmax's exponentials and their sum in one pass.
#[inline]
pub fn exp_sum(x: &mut [f32], shift: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { exp_sum_avx512(x, shift) };
        }
        if has_avx2() {
            // SAFETY: as above.
            return unsafe { exp_sum_avx2(x, shift) };
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd_wasm::exp_sum(x, shift);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    exp_sum_lanes(x, shift)
}

/// `out[i] = cap · tanh(x[i] / cap)` (tanh within a few ulp): soft-capping, and the tanh of
/// a vision tower's f32 GELU. No hand-written simd128 form: with no running sum, the portable
/// loop is already one the compiler vectorises as it stands.
pub fn soft_cap(out: &mut [f32], x: &[f32], cap: f32) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { soft_cap_avx512(out, x, cap) };
        }
        if has_avx2() {
            // SAFETY: as above.
            return unsafe { soft_cap_avx2(out, x, cap) };
        }
    }
    soft_cap_lanes(out, x, cap)
}

/// The largest element of `x` (−∞ when empty; NaNs are passed over).
#[inline]
pub fn max(x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { max_avx512(x) };
        }
        if has_avx2() {
            // SAFETY: as above.
            return unsafe { max_avx2(x) };
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd_wasm::max(x);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    max_lanes(x)
}

#[cfg(test)]
mod tests {
    #[test]
    fn dot_and_axpy_match_plain_loops() {
        let a: Vec<f32> = (0..77).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..77).map(|i| (i as f32 * 0.11).cos()).collect();
        let want: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
        assert!((super::dot(&a, &b) as f64 - want).abs() < 1e-4);
        let mut y = b.clone();
        super::axpy(&mut y, 0.5, &a);
        for i in 0..77 {
            assert!((y[i] - (b[i] + 0.5 * a[i])).abs() < 1e-6);
        }
    }

    #[test]
    fn exp_sum_is_within_a_few_ulp() {
        // Arguments across the range a softmax gives (≤ 0) and some positive ones; lengths that
        // leave a tail after the 16-wide body.
        let xs: Vec<f32> = (0..4001).map(|i| -87.0 + i as f32 * 0.043_7).collect();
        let mut y = xs.clone();
        super::exp_sum(&mut y, 0.25);
        let mut worst = 0f64;
        for (&x, &got) in xs.iter().zip(&y) {
            let want = ((x - 0.25) as f64).exp();
            if want > 1e-37 {
                worst = worst.max((got as f64 - want).abs() / want);
            }
        }
        // Measured 0.7 units in the last place (2^-23 relative each).
        assert!(
            worst < 2.0 * f32::EPSILON as f64,
            "worst relative error {worst:e}"
        );
        // The sum, over a softmax-like row (scores up to 12 below the maximum).
        let mut row: Vec<f32> = (0..1003).map(|i| (i as f32 * 0.91).sin() * 6.0).collect();
        let want: f64 = row.iter().map(|&x| (x as f64 - 6.0).exp()).sum();
        let sum = super::exp_sum(&mut row, 6.0) as f64;
        assert!((sum - want).abs() / want < 1e-6, "{sum} vs {want}");
        assert_eq!(super::exp_sum(&mut [0.0], 0.0), 1.0);
        let mut low = [-1000.0f32, f32::NEG_INFINITY];
        super::exp_sum(&mut low, 0.0);
        assert!(low.iter().all(|&v| v > 0.0 && v < 2e-38), "{low:?}");
        let mut nan = [f32::NAN, 0.0];
        assert!(super::exp_sum(&mut nan, 0.0).is_nan());
    }

    #[test]
    fn max_passes_over_nan() {
        let mut x: Vec<f32> = (0..37).map(|i| (i as f32 * 0.7).sin()).collect();
        x[20] = 3.5;
        x[3] = f32::NAN;
        assert_eq!(super::max(&x), 3.5);
        x[20] = 0.0;
        x[36] = 4.0;
        assert_eq!(super::max(&x), 4.0);
        assert_eq!(super::max(&[]), f32::NEG_INFINITY);
    }

    #[test]
    fn soft_cap_is_cap_times_tanh() {
        let x: Vec<f32> = (0..301).map(|i| (i as f32 - 150.0) * 0.37).collect();
        let mut out = vec![0f32; 301];
        super::soft_cap(&mut out, &x, 30.0);
        for (&v, &o) in x.iter().zip(&out) {
            let want = 30.0 * (v as f64 / 30.0).tanh();
            assert!(
                (o as f64 - want).abs() <= 4e-7 * want.abs(),
                "{v}: {o} vs {want}"
            );
        }
    }
}
