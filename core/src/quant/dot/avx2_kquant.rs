//! AVX2 kernels for K-quant weights against Q8_K activations. Each super-block's integer sum
//! is reduced exactly to one i32 and scaled exactly as the scalar kernel does, so results are
//! bit-identical to it.

use std::arch::x86_64::*;

use super::avx2_util::*;

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4_k_q8_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let low = _mm256_set1_epi8(0x0F);
    let mut sum = 0f32;
    for i in 0..nb {
        let bw = px.add(i * 144);
        let ba = py.add(i * 292);
        let da = f32_at(ba);
        let (sc, mn) = scale_min_words(bw.add(4));
        let summ = k_min_sum(ba, mn);
        let mut acc = _mm256_setzero_si256();
        for c in 0..4 {
            let raw = _mm256_loadu_si256(bw.add(16 + 32 * c) as *const __m256i);
            let lo = _mm256_and_si256(raw, low);
            let hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
            let a0 = _mm256_loadu_si256(ba.add(4 + 64 * c) as *const __m256i);
            let a1 = _mm256_loadu_si256(ba.add(36 + 64 * c) as *const __m256i);
            let s0 = ((sc >> (16 * c)) & 0xff) as i16;
            let s1 = ((sc >> (16 * c + 8)) & 0xff) as i16;
            // u4 * i8 pairs fit i16 (2 * 15 * 127); the scale multiply widens to i32.
            let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a0), _mm256_set1_epi16(s0));
            let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a1), _mm256_set1_epi16(s1));
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
    let picks = q6_k_scale_picks();
    let mut sum = 0f32;
    for i in 0..nb {
        let bw = px.add(i * 210);
        let ba = py.add(i * 292);
        let da = f32_at(ba);
        // The 16 scales as i16: lanes 0..8 in the low half, 8..16 in the high half.
        let sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(bw.add(192) as *const __m128i));
        // sum((q - 32) * a) = sum(q * a) - 32 * bsum, per 16-element group.
        let bsums = _mm256_loadu_si256(ba.add(260) as *const __m256i);
        let corr = hsum_epi32(_mm256_madd_epi16(sc16, bsums));
        let mut acc = _mm256_setzero_si256();
        for h in 0..2 {
            // Scales of groups h*8 .. h*8 + 8 in both halves.
            let half = if h == 0 {
                _mm256_permute2x128_si256(sc16, sc16, 0x00)
            } else {
                _mm256_permute2x128_si256(sc16, sc16, 0x11)
            };
            let quants = q6_k_half(bw, h);
            for (s, q) in quants.into_iter().enumerate() {
                let a = _mm256_loadu_si256(ba.add(4 + 128 * h + 32 * s) as *const __m256i);
                let sc = _mm256_shuffle_epi8(half, picks[s]);
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

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q5_k_q8_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let low = _mm256_set1_epi8(0x0F);
    let fifth = _mm256_set1_epi8(0x10);
    let mut sum = 0f32;
    for i in 0..nb {
        let bw = px.add(i * 176);
        let ba = py.add(i * 292);
        let da = f32_at(ba);
        let (sc, mn) = scale_min_words(bw.add(4));
        let summ = k_min_sum(ba, mn);
        // Byte l of qh holds the fifth bit of element l of every sub-block j in bit j.
        let qh = _mm256_loadu_si256(bw.add(16) as *const __m256i);
        let mut acc = _mm256_setzero_si256();
        for c in 0..4 {
            let raw = _mm256_loadu_si256(bw.add(48 + 32 * c) as *const __m256i);
            let b0 = _mm256_set1_epi8(1 << (2 * c));
            let b1 = _mm256_set1_epi8(1 << (2 * c + 1));
            let h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), fifth);
            let h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), fifth);
            let lo = _mm256_or_si256(_mm256_and_si256(raw, low), h0);
            let hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), low), h1);
            let a0 = _mm256_loadu_si256(ba.add(4 + 64 * c) as *const __m256i);
            let a1 = _mm256_loadu_si256(ba.add(36 + 64 * c) as *const __m256i);
            let s0 = _mm256_set1_epi16(((sc >> (16 * c)) & 0xff) as i16);
            let s1 = _mm256_set1_epi16(((sc >> (16 * c + 8)) & 0xff) as i16);
            // u5 * i8 pairs fit i16 (2 * 31 * 127).
            let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a0), s0);
            let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a1), s1);
            acc = _mm256_add_epi32(acc, _mm256_add_epi32(p0, p1));
        }
        let sumi = hsum_epi32(acc);
        sum += da * f16_at(bw) * sumi as f32 - da * f16_at(bw.add(2)) * summ as f32;
    }
    sum
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn iq4_xs_q8_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let table = iq4_table();
    let mut sum = 0f32;
    for i in 0..nb {
        let bw = px.add(i * 136);
        let ba = py.add(i * 292);
        let scales = super::super::iq4::iq4_xs_scales(&x[i * 136..i * 136 + 8]);
        let mut acc = _mm256_setzero_si256();
        for (ib, sc) in scales.iter().enumerate() {
            let q = _mm256_shuffle_epi8(table, nibbles_32(bw.add(8 + 16 * ib)));
            let a = _mm256_loadu_si256(ba.add(4 + 32 * ib) as *const __m256i);
            // Levels are within +-127, so sign-moved pairs fit i16 (2 * 127 * 127).
            let p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
            let p = _mm256_madd_epi16(p16, _mm256_set1_epi16(*sc as i16));
            acc = _mm256_add_epi32(acc, p);
        }
        sum += f32_at(ba) * f16_at(bw) * hsum_epi32(acc) as f32;
    }
    sum
}

/// Shared by Q2_K and Q3_K: sum over the block of scale[g] * q * a, with the unsigned 2-bit
/// planes of `qs` (element h*128 + s*32 + l in bits 2s of qs[h*32 + l]), an optional extra
/// bit `extra(h, s)` or-ed in, and sixteen i16 group scales `sc16`.
#[inline(always)]
unsafe fn planes_dot(
    qs: *const u8,
    ya: *const u8,
    sc16: __m256i,
    extra: impl Fn(usize, usize) -> __m256i,
) -> __m256i {
    let three = _mm256_set1_epi8(3);
    let picks = q6_k_scale_picks();
    let mut acc = _mm256_setzero_si256();
    for h in 0..2 {
        let half = if h == 0 {
            _mm256_permute2x128_si256(sc16, sc16, 0x00)
        } else {
            _mm256_permute2x128_si256(sc16, sc16, 0x11)
        };
        let bits = _mm256_loadu_si256(qs.add(32 * h) as *const __m256i);
        for (s, pick) in picks.iter().enumerate() {
            let shift = _mm_cvtsi32_si128(2 * s as i32);
            let q = _mm256_and_si256(_mm256_srl_epi16(bits, shift), three);
            let q = _mm256_or_si256(q, extra(h, s));
            let a = _mm256_loadu_si256(ya.add(128 * h + 32 * s) as *const __m256i);
            let sc = _mm256_shuffle_epi8(half, *pick);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), sc));
        }
    }
    acc
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q2_k_q8_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut sum = 0f32;
    for i in 0..nb {
        let bw = px.add(i * 84);
        let ba = py.add(i * 292);
        let packed = _mm_loadu_si128(bw as *const __m128i);
        let scales = _mm256_cvtepu8_epi16(_mm_and_si128(packed, _mm_set1_epi8(0x0F)));
        let mins = _mm256_cvtepu8_epi16(_mm_and_si128(
            _mm_srli_epi16(packed, 4),
            _mm_set1_epi8(0x0F),
        ));
        let bsums = _mm256_loadu_si256(ba.add(260) as *const __m256i);
        let summ = hsum_epi32(_mm256_madd_epi16(mins, bsums));
        let acc = planes_dot(bw.add(16), ba.add(4), scales, |_, _| _mm256_setzero_si256());
        let da = f32_at(ba);
        sum += da * f16_at(bw.add(80)) * hsum_epi32(acc) as f32
            - da * f16_at(bw.add(82)) * summ as f32;
    }
    sum
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q3_k_q8_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let four = _mm256_set1_epi8(4);
    let mut sum = 0f32;
    for i in 0..nb {
        let bw = px.add(i * 110);
        let ba = py.add(i * 292);
        let sc = super::super::kquant::scales_q3_k(&x[i * 110 + 96..i * 110 + 108]);
        let sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(sc.as_ptr() as *const __m128i));
        // q = low - 4 * (1 - hbit), so q + 4 = low | (hbit << 2) is unsigned; the +4 is taken
        // back out with the block sums: sum(sc * 4 * a) = 4 * sum(sc_g * bsum_g).
        let bsums = _mm256_loadu_si256(ba.add(260) as *const __m256i);
        let corr = hsum_epi32(_mm256_madd_epi16(sc16, bsums));
        let hmask = _mm256_loadu_si256(bw as *const __m256i);
        let acc = planes_dot(bw.add(32), ba.add(4), sc16, |h, s| {
            let bit = _mm256_set1_epi8(1 << (4 * h + s));
            let set = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit);
            _mm256_and_si256(set, four)
        });
        let sumi = hsum_epi32(acc) - 4 * corr;
        sum += f32_at(ba) * f16_at(bw.add(108)) * sumi as f32;
    }
    sum
}
