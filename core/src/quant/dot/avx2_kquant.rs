//! AVX2 kernels for K-quant weights against Q8_K activations. Each super-block's integer sum
//! is reduced exactly to one i32 and scaled exactly as the scalar kernel does, so results are
//! bit-identical to it.

use std::arch::x86_64::*;

use super::super::kquant::scale_min_k4;
use super::avx2_util::*;

/// The 16 i16 block sums of a Q8_K activation block at `ba`.
#[inline(always)]
unsafe fn bsums(ba: *const u8) -> [i16; 16] {
    (ba.add(260) as *const [i16; 16]).read_unaligned()
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4_k_q8_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let low = _mm256_set1_epi8(0x0F);
    let mut sum = 0f32;
    for i in 0..nb {
        let bw = px.add(i * 144);
        let ba = py.add(i * 292);
        let da = f32_at(ba);
        let (sc, mn) = scale_min_k4(&x[i * 144 + 4..i * 144 + 16]);
        let bs = bsums(ba);
        let mut summ = 0i32;
        for j in 0..8 {
            summ += mn[j] as i32 * (bs[2 * j] as i32 + bs[2 * j + 1] as i32);
        }
        let mut acc = _mm256_setzero_si256();
        for c in 0..4 {
            let raw = _mm256_loadu_si256(bw.add(16 + 32 * c) as *const __m256i);
            let lo = _mm256_and_si256(raw, low);
            let hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
            let a0 = _mm256_loadu_si256(ba.add(4 + 64 * c) as *const __m256i);
            let a1 = _mm256_loadu_si256(ba.add(36 + 64 * c) as *const __m256i);
            // u4 * i8 pairs fit i16 (2 * 15 * 127); the scale multiply widens to i32.
            let p0 = _mm256_madd_epi16(
                _mm256_maddubs_epi16(lo, a0),
                _mm256_set1_epi16(sc[2 * c] as i16),
            );
            let p1 = _mm256_madd_epi16(
                _mm256_maddubs_epi16(hi, a1),
                _mm256_set1_epi16(sc[2 * c + 1] as i16),
            );
            acc = _mm256_add_epi32(acc, _mm256_add_epi32(p0, p1));
        }
        let sumi = hsum_epi32(acc);
        sum += da * f16_at(bw) * sumi as f32 - da * f16_at(bw.add(2)) * summ as f32;
    }
    sum
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q6_k_q8_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let low = _mm256_set1_epi8(0x0F);
    let two = _mm256_set1_epi8(0x03);
    let mut sum = 0f32;
    for i in 0..nb {
        let bw = px.add(i * 210);
        let ba = py.add(i * 292);
        let da = f32_at(ba);
        let scales = (bw.add(192) as *const [i8; 16]).read_unaligned();
        let bs = bsums(ba);
        // sum((q - 32) * a) = sum(q * a) - 32 * bsum, per 16-element group.
        let mut corr = 0i32;
        for g in 0..16 {
            corr += scales[g] as i32 * bs[g] as i32;
        }
        let mut acc = _mm256_setzero_si256();
        for h in 0..2 {
            let ql = bw.add(64 * h);
            let qh = _mm256_loadu_si256(bw.add(128 + 32 * h) as *const __m256i);
            let l0 = _mm256_loadu_si256(ql as *const __m256i);
            let l1 = _mm256_loadu_si256(ql.add(32) as *const __m256i);
            let nib = [
                _mm256_and_si256(l0, low),
                _mm256_and_si256(l1, low),
                _mm256_and_si256(_mm256_srli_epi16(l0, 4), low),
                _mm256_and_si256(_mm256_srli_epi16(l1, 4), low),
            ];
            let high = [
                _mm256_and_si256(qh, two),
                _mm256_and_si256(_mm256_srli_epi16(qh, 2), two),
                _mm256_and_si256(_mm256_srli_epi16(qh, 4), two),
                _mm256_and_si256(_mm256_srli_epi16(qh, 6), two),
            ];
            for s in 0..4 {
                let q = _mm256_or_si256(nib[s], _mm256_slli_epi16(high[s], 4));
                let a = _mm256_loadu_si256(ba.add(4 + 128 * h + 32 * s) as *const __m256i);
                let g = h * 8 + 2 * s;
                let sc = _mm256_set_m128i(
                    _mm_set1_epi16(scales[g + 1] as i16),
                    _mm_set1_epi16(scales[g] as i16),
                );
                // u6 * i8 pairs fit i16 (2 * 63 * 127).
                let p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), sc);
                acc = _mm256_add_epi32(acc, p);
            }
        }
        let sumi = hsum_epi32(acc) - 32 * corr;
        sum += da * f16_at(bw.add(208)) * sumi as f32;
    }
    sum
}
