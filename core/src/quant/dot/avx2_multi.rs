//! AVX2 kernels dotting one weight row with 4 activation rows at once (prompt processing):
//! each weight block is loaded and unpacked once and used 4 times. Per column, the integer
//! work and the float accumulation order are those of the single-row kernels, so results are
//! bit-identical to them (a token's logits must not depend on its batch).

use std::arch::x86_64::*;

use super::avx2_util::*;

/// Activation rows per call.
pub(super) const COLS: usize = 4;

/// Shared loop for weights against 4 Q8_0 activation rows; `quants` gives the block's signed
/// weight bytes.
#[inline(always)]
unsafe fn with_q8_0(
    x: &[u8],
    ys: [&[u8]; COLS],
    nb: usize,
    size: usize,
    quants: impl Fn(*const u8) -> __m256i,
    dot: impl Fn(__m256i, __m256i) -> __m256i,
) -> [f32; COLS] {
    let px = x.as_ptr();
    let py = ys.map(|y| y.as_ptr());
    // Even and odd blocks in separate accumulators, added at the end: the float order of
    // the one-row kernel (`avx2_legacy::with_q8_0`), so both give the same bits. Named
    // accumulator sets rather than `acc[k][i & 1]`, which kept them in memory.
    macro_rules! block {
        ($i:expr, $acc:ident) => {{
            let i = $i;
            let bw = px.add(i * size);
            let dw = f16x8_at(bw);
            let q = quants(bw);
            let q_abs = _mm256_sign_epi8(q, q);
            for (k, acc) in $acc.iter_mut().enumerate() {
                let ba = py[k].add(i * 34);
                let d = _mm256_mul_ps(dw, f16x8_at(ba));
                let qy = _mm256_loadu_si256(ba.add(2) as *const __m256i);
                let p = dot(q_abs, _mm256_sign_epi8(qy, q));
                *acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), *acc);
            }
        }};
    }
    let (mut acc0, mut acc1) = ([_mm256_setzero_ps(); COLS], [_mm256_setzero_ps(); COLS]);
    let mut i = 0;
    while i + 2 <= nb {
        block!(i, acc0);
        block!(i + 1, acc1);
        i += 2;
    }
    if i < nb {
        block!(i, acc0);
    }
    std::array::from_fn(|k| hsum_ps(_mm256_add_ps(acc0[k], acc1[k])))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4_1_q8_1(x: &[u8], ys: [&[u8]; COLS], nb: usize) -> [f32; COLS] {
    let px = x.as_ptr();
    let py = ys.map(|y| y.as_ptr());
    // Even and odd blocks in separate accumulators, as the one-row kernel
    // (`avx2_legacy::q4_1_q8_1`) sums them, so a token gets the same bits either way (named
    // sets, kept in registers, as in `with_q8_0`).
    macro_rules! block {
        ($i:expr, $acc:ident, $mins:ident) => {{
            let i = $i;
            let bw = px.add(i * 20);
            let dw = f16x8_at(bw);
            let mw = f16x8_at(bw.add(2));
            let q = nibbles_32(bw.add(4));
            for k in 0..COLS {
                let ba = py[k].add(i * 36);
                let d = _mm256_mul_ps(dw, f16x8_at(ba));
                $mins[k] = _mm256_fmadd_ps(mw, f16x8_at(ba.add(2)), $mins[k]);
                let qy = _mm256_loadu_si256(ba.add(4) as *const __m256i);
                let p = dot_u8_i8(q, qy);
                $acc[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), $acc[k]);
            }
        }};
    }
    let (mut acc0, mut acc1) = ([_mm256_setzero_ps(); COLS], [_mm256_setzero_ps(); COLS]);
    let (mut min0, mut min1) = ([_mm256_setzero_ps(); COLS], [_mm256_setzero_ps(); COLS]);
    let mut i = 0;
    while i + 2 <= nb {
        block!(i, acc0, min0);
        block!(i + 1, acc1, min1);
        i += 2;
    }
    if i < nb {
        block!(i, acc0, min0);
    }
    let mut out = [0f32; COLS];
    for k in 0..COLS {
        // Every lane of a min accumulator holds the same sum: take one.
        let m = _mm256_add_ps(min0[k], min1[k]);
        out[k] =
            hsum_ps(_mm256_add_ps(acc0[k], acc1[k])) + _mm_cvtss_f32(_mm256_castps256_ps128(m));
    }
    out
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4_k_q8_k(x: &[u8], ys: [&[u8]; COLS], nb: usize) -> [f32; COLS] {
    let px = x.as_ptr();
    let py = ys.map(|y| y.as_ptr());
    let low = _mm256_set1_epi8(0x0F);
    let mut sum = [0f32; COLS];
    for i in 0..nb {
        let bw = px.add(i * 144);
        let (sc, mn) = scale_min_words(bw.add(4));
        let (dw, dminw) = (f16_at(bw), f16_at(bw.add(2)));
        let mut acc = [_mm256_setzero_si256(); COLS];
        for c in 0..4 {
            let raw = _mm256_loadu_si256(bw.add(16 + 32 * c) as *const __m256i);
            let lo = _mm256_and_si256(raw, low);
            let hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
            let s0 = _mm256_set1_epi16(((sc >> (16 * c)) & 0xff) as i16);
            let s1 = _mm256_set1_epi16(((sc >> (16 * c + 8)) & 0xff) as i16);
            for k in 0..COLS {
                let ba = py[k].add(i * 292);
                let a0 = _mm256_loadu_si256(ba.add(4 + 64 * c) as *const __m256i);
                let a1 = _mm256_loadu_si256(ba.add(36 + 64 * c) as *const __m256i);
                let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a0), s0);
                let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a1), s1);
                acc[k] = _mm256_add_epi32(acc[k], _mm256_add_epi32(p0, p1));
            }
        }
        for k in 0..COLS {
            let ba = py[k].add(i * 292);
            let da = f32_at(ba);
            let summ = k_min_sum(ba, mn);
            let sumi = hsum_epi32(acc[k]);
            sum[k] += da * dw * sumi as f32 - da * dminw * summ as f32;
        }
    }
    sum
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q6_k_q8_k(x: &[u8], ys: [&[u8]; COLS], nb: usize) -> [f32; COLS] {
    let px = x.as_ptr();
    let py = ys.map(|y| y.as_ptr());
    let picks = q6_k_scale_picks();
    let mut sum = [0f32; COLS];
    for i in 0..nb {
        let bw = px.add(i * 210);
        let sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(bw.add(192) as *const __m128i));
        let mut acc = [_mm256_setzero_si256(); COLS];
        for h in 0..2 {
            let half = if h == 0 {
                _mm256_permute2x128_si256(sc16, sc16, 0x00)
            } else {
                _mm256_permute2x128_si256(sc16, sc16, 0x11)
            };
            let quants = q6_k_half(bw, h);
            for (s, q) in quants.into_iter().enumerate() {
                let sc = _mm256_shuffle_epi8(half, picks[s]);
                for k in 0..COLS {
                    let a = py[k].add(i * 292 + 4 + 128 * h + 32 * s);
                    let a = _mm256_loadu_si256(a as *const __m256i);
                    let p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), sc);
                    acc[k] = _mm256_add_epi32(acc[k], p);
                }
            }
        }
        let dw = f16_at(bw.add(208));
        for k in 0..COLS {
            let ba = py[k].add(i * 292);
            let bsums = _mm256_loadu_si256(ba.add(260) as *const __m256i);
            let corr = hsum_epi32(_mm256_madd_epi16(sc16, bsums));
            let sumi = hsum_epi32(acc[k]) - 32 * corr;
            sum[k] += f32_at(ba) * dw * sumi as f32;
        }
    }
    sum
}

/// Signed weight bytes of a Q8_0 block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_quants(b: *const u8) -> __m256i {
    _mm256_loadu_si256(b.add(2) as *const __m256i)
}

/// Signed weight bytes of a Q4_0 block (nibbles minus 8).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0_quants(b: *const u8) -> __m256i {
    _mm256_sub_epi8(nibbles_32(b.add(2)), _mm256_set1_epi8(8))
}

/// Signed weight bytes of a Q5_0 block (nibbles with the fifth bit, minus 16).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_0_quants(b: *const u8) -> __m256i {
    let clear = _mm256_andnot_si256(bits_to_bytes_32(b.add(2)), _mm256_set1_epi8(-16));
    _mm256_or_si256(nibbles_32(b.add(6)), clear)
}

/// The two kernels of a type dotted with 4 Q8_0 activations: with the plain AVX2 and with the
/// AVX-VNNI byte dot (same bits).
macro_rules! q8_0_kernels {
    ($size:expr, $quants:ident => $multi:ident, $multi_vnni:ident) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $multi(x: &[u8], ys: [&[u8]; COLS], nb: usize) -> [f32; COLS] {
            with_q8_0(x, ys, nb, $size, |b| $quants(b), |u, s| dot_u8_i8(u, s))
        }

        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $multi_vnni(x: &[u8], ys: [&[u8]; COLS], nb: usize) -> [f32; COLS] {
            with_q8_0(
                x,
                ys,
                nb,
                $size,
                |b| $quants(b),
                |u, s| dot_u8_i8_vnni(u, s),
            )
        }
    };
}

q8_0_kernels!(34, q8_0_quants => q8_0_q8_0, q8_0_q8_0_vnni);
q8_0_kernels!(18, q4_0_quants => q4_0_q8_0, q4_0_q8_0_vnni);
q8_0_kernels!(22, q5_0_quants => q5_0_q8_0, q5_0_q8_0_vnni);
