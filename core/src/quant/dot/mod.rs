//! Dot products of quantized weight rows with activations, for the CPU backend.
//!
//! As in GGML, an activation row is quantized once to the weight type's "vec-dot type"
//! ([`vec_dot_type`]), then every weight row is dotted with it in integer arithmetic per
//! block ([`vec_dot`]). Float weights (F32, F16, BF16) take f32 activations.
//!
//! Each kernel has a portable scalar version (`scalar.rs`) and, on x86_64, an AVX2+FMA+F16C
//! version chosen at run time (`avx2_*.rs`); both compute the same exact integer sums per
//! block and differ only in the order of the float accumulation.

mod scalar;

#[cfg(target_arch = "x86_64")]
mod avx2_act;
#[cfg(target_arch = "x86_64")]
mod avx2_kquant;
#[cfg(target_arch = "x86_64")]
mod avx2_legacy;
#[cfg(target_arch = "x86_64")]
mod avx2_util;

use crate::dtype::GgmlType;

/// The type activations must be quantized to before [`vec_dot`] with weights of type `w`.
pub fn vec_dot_type(w: GgmlType) -> GgmlType {
    use GgmlType::*;
    match w {
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL => Q8_0,
        Q4_1 | Q5_1 => Q8_1,
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | IQ4_XS => Q8_K,
        _ => F32,
    }
}

/// Whether [`vec_dot`] handles weights of type `w`.
pub fn supports_vec_dot(w: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        w,
        F32 | F16
            | BF16
            | Q4_0
            | Q4_1
            | Q5_0
            | Q5_1
            | Q8_0
            | IQ4_NL
            | Q2_K
            | Q3_K
            | Q4_K
            | Q5_K
            | Q6_K
            | IQ4_XS
    )
}

/// Whether the AVX2 kernels can run on this CPU (checked once, then cached by std).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// Checks the row lengths; a mismatch is a caller bug (the backend sizes these buffers).
fn check(w: GgmlType, w_row: &[u8], act: &[u8], n: usize) {
    let wt = vec_dot_type(w);
    let need_w = w.bytes_for(n as u64);
    let need_a = wt.bytes_for(n as u64);
    assert!(
        supports_vec_dot(w),
        "vec_dot: weight type {w} is not supported"
    );
    assert!(
        need_w == Some(w_row.len() as u64) && need_a == Some(act.len() as u64),
        "vec_dot: {n} elements of {w} need {need_w:?} weight bytes and {need_a:?} {wt} \
         activation bytes, got {} and {}",
        w_row.len(),
        act.len()
    );
}

/// Dot product of one weight row (`n` elements of type `w`) with an activation row already in
/// [`vec_dot_type`]`(w)` (little-endian f32 bytes for float weights).
///
/// Panics when the lengths do not match `n` or the type is not supported
/// ([`supports_vec_dot`]): both are caller bugs, not data errors.
pub fn vec_dot(w: GgmlType, w_row: &[u8], act: &[u8], n: usize) -> f32 {
    check(w, w_row, act, n);
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        if let Some(v) = avx2_dot(w, w_row, act, n) {
            return v;
        }
    }
    scalar_dot(w, w_row, act, n)
}

/// The portable kernel (also the reference the SIMD kernels are tested against).
pub fn vec_dot_scalar(w: GgmlType, w_row: &[u8], act: &[u8], n: usize) -> f32 {
    check(w, w_row, act, n);
    scalar_dot(w, w_row, act, n)
}

fn scalar_dot(w: GgmlType, x: &[u8], y: &[u8], n: usize) -> f32 {
    use GgmlType::*;
    let nb = n / w.block_size();
    match w {
        F32 => scalar::f32_f32(x, y, n),
        F16 => scalar::f16_f32(x, y, n),
        BF16 => scalar::bf16_f32(x, y, n),
        Q4_0 => scalar::q4_0_q8_0(x, y, nb),
        Q4_1 => scalar::q4_1_q8_1(x, y, nb),
        Q5_0 => scalar::q5_0_q8_0(x, y, nb),
        Q5_1 => scalar::q5_1_q8_1(x, y, nb),
        Q8_0 => scalar::q8_0_q8_0(x, y, nb),
        IQ4_NL => scalar::iq4_nl_q8_0(x, y, nb),
        Q2_K => scalar::q2_k_q8_k(x, y, nb),
        Q3_K => scalar::q3_k_q8_k(x, y, nb),
        Q4_K => scalar::q4_k_q8_k(x, y, nb),
        Q5_K => scalar::q5_k_q8_k(x, y, nb),
        Q6_K => scalar::q6_k_q8_k(x, y, nb),
        IQ4_XS => scalar::iq4_xs_q8_k(x, y, nb),
        _ => unreachable!("checked by supports_vec_dot"),
    }
}

/// The AVX2 kernel for `w`, if there is one. Callers have checked the CPU features.
#[cfg(target_arch = "x86_64")]
fn avx2_dot(w: GgmlType, x: &[u8], y: &[u8], n: usize) -> Option<f32> {
    use GgmlType::*;
    let nb = n / w.block_size();
    // SAFETY: has_avx2() confirmed AVX2, FMA and F16C; `check` confirmed the lengths.
    unsafe {
        Some(match w {
            F32 => avx2_legacy::f32_f32(x, y, n),
            F16 => avx2_legacy::f16_f32(x, y, n),
            Q4_0 => avx2_legacy::q4_0_q8_0(x, y, nb),
            Q4_1 => avx2_legacy::q4_1_q8_1(x, y, nb),
            Q5_0 => avx2_legacy::q5_0_q8_0(x, y, nb),
            Q8_0 => avx2_legacy::q8_0_q8_0(x, y, nb),
            Q4_K => avx2_kquant::q4_k_q8_k(x, y, nb),
            Q6_K => avx2_kquant::q6_k_q8_k(x, y, nb),
            _ => return None,
        })
    }
}

/// Whether [`vec_dot`] uses a SIMD kernel for `w` on this machine (for tests and benchmarks).
pub fn has_simd_kernel(w: GgmlType) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use GgmlType::*;
        has_avx2() && matches!(w, F32 | F16 | Q4_0 | Q4_1 | Q5_0 | Q8_0 | Q4_K | Q6_K)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = w;
        false
    }
}

/// Quantizes one activation row `x` to Q8_0 (bit-identical to [`crate::quant::quantize`],
/// using AVX2 when available). `dst` holds `x.len() / 32 * 34` bytes.
pub(crate) fn quantize_q8_0_fast(x: &[f32], dst: &mut [u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: features checked; the caller checked the lengths.
        unsafe { avx2_act::quantize_q8_0(x, dst) };
        return true;
    }
    let _ = (x, dst);
    false
}

/// Quantizes one activation row to Q8_K with AVX2 when available (bit-identical to the
/// scalar quantizer). Returns false when the caller must use the scalar path.
pub(crate) fn quantize_q8_k_fast(x: &[f32], dst: &mut [u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: features checked; the caller checked the lengths.
        unsafe { avx2_act::quantize_q8_k(x, dst) };
        return true;
    }
    let _ = (x, dst);
    false
}

#[cfg(test)]
mod tests;
