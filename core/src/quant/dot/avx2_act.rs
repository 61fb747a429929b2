//! AVX2 quantization of activation rows to Q8_0, Q8_1 and Q8_K, rounding as llama.cpp's CPU
//! backend does (inverse scale 127/amax, round half to even), so that our logits follow its
//! numerics. The scalar quantizers (GGML's reference: 1/d, round half away from zero) differ
//! only at rounding ties and at one-ulp differences of the inverse scale.

use std::arch::x86_64::*;

use super::super::float::f16_bytes;
use super::avx2_util::hsum_epi32;

/// Largest |x| over 8-float groups starting at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn absmax(p: *const f32, groups: usize) -> f32 {
    let sign = _mm256_set1_ps(-0.0);
    let mut m = _mm256_setzero_ps();
    for g in 0..groups {
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(p.add(8 * g))));
    }
    let s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    let s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_max_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// round(v * id) half to even, as i32 lanes: what llama.cpp's CPU backend does to
/// activations (its AVX2 Q8_0/Q8_1 quantizers round to nearest even; its Q8_K quantizer
/// rounds with the "add 1.5·2^23" trick, also to nearest even).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn round_even(v: __m256, id: __m256) -> __m256i {
    let v = _mm256_mul_ps(v, id);
    _mm256_cvtps_epi32(_mm256_round_ps(
        v,
        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
    ))
}

/// Packs 4 x 8 i32 lanes (values within i8) into 32 bytes in order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_32(q: [__m256i; 4]) -> __m256i {
    let a = _mm256_packs_epi32(q[0], q[1]);
    let b = _mm256_packs_epi32(q[2], q[3]);
    let c = _mm256_packs_epi16(a, b);
    // The packs interleave 128-bit lanes; restore element order.
    _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn quantize_q8_0(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.chunks_exact(32).zip(dst.chunks_exact_mut(34)) {
        let p = xb.as_ptr();
        let amax = absmax(p, 4);
        let d = amax / 127.0;
        let id = _mm256_set1_ps(if amax == 0.0 { 0.0 } else { 127.0 / amax });
        let q = [0, 1, 2, 3].map(|g| round_even(_mm256_loadu_ps(p.add(8 * g)), id));
        b[0..2].copy_from_slice(&f16_bytes(d));
        _mm256_storeu_si256(b.as_mut_ptr().add(2) as *mut __m256i, pack_32(q));
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn quantize_q8_1(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.chunks_exact(32).zip(dst.chunks_exact_mut(36)) {
        let p = xb.as_ptr();
        let amax = absmax(p, 4);
        let d = amax / 127.0;
        let id = _mm256_set1_ps(if amax == 0.0 { 0.0 } else { 127.0 / amax });
        let q = [0, 1, 2, 3].map(|g| round_even(_mm256_loadu_ps(p.add(8 * g)), id));
        let sum = hsum_epi32(_mm256_add_epi32(
            _mm256_add_epi32(q[0], q[1]),
            _mm256_add_epi32(q[2], q[3]),
        ));
        b[0..2].copy_from_slice(&f16_bytes(d));
        b[2..4].copy_from_slice(&f16_bytes(d * sum as f32));
        _mm256_storeu_si256(b.as_mut_ptr().add(4) as *mut __m256i, pack_32(q));
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn quantize_q8_k(x: &[f32], dst: &mut [u8]) {
    let lo = _mm256_set1_epi32(-127);
    let hi = _mm256_set1_epi32(127);
    for (xb, b) in x.chunks_exact(256).zip(dst.chunks_exact_mut(292)) {
        let p = xb.as_ptr();
        // As llama.cpp's Q8_K quantizer: inverse scale 127/amax, scale its reciprocal.
        let amax = absmax(p, 32);
        let iscale = if amax == 0.0 { 0.0 } else { 127.0 / amax };
        let d = if amax == 0.0 { 0.0 } else { 1.0 / iscale };
        let id = _mm256_set1_ps(iscale);
        b[0..4].copy_from_slice(&d.to_le_bytes());
        for c in 0..8 {
            let q = [0, 1, 2, 3].map(|g| {
                let v = round_even(_mm256_loadu_ps(p.add(32 * c + 8 * g)), id);
                _mm256_min_epi32(_mm256_max_epi32(v, lo), hi)
            });
            for half in 0..2 {
                let s = hsum_epi32(_mm256_add_epi32(q[2 * half], q[2 * half + 1])) as i16;
                let at = 260 + 2 * (2 * c + half);
                b[at..at + 2].copy_from_slice(&s.to_le_bytes());
            }
            _mm256_storeu_si256(b.as_mut_ptr().add(4 + 32 * c) as *mut __m256i, pack_32(q));
        }
    }
}
