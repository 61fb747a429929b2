//! The batched-decode row kernels for Q6_K and Q4_K on AVX-512: each weight super-block is unpacked once
//! into four 64-element registers (with its sixteen scales spread to match) and dotted with
//! up to 16 tokens. The integer sums are exact whatever the instruction order, and each token's
//! float step is the one-row kernel's (`sum += d_a · d_w · sumi`), so every (row, token) keeps
//! the bits of [`super::vec_dot`]; against the AVX2 1×4 kernel it needs half the integer
//! instructions per element and one horizontal sum per super-block and token instead of two.

use std::arch::x86_64::*;

use super::avx2_util::{
    f16_at, f32_at, hsum_epi32, k_min_sum, prefetch_row, q6_k_half, scale_min_words,
};

/// Bytes of a Q6_K block and of a Q8_K activation block.
const W_BYTES: usize = 210;
const A_BYTES: usize = 292;

/// Rows ahead whose bytes are requested before they are read.
const PREFETCH_ROWS: usize = 2;

/// `out[r · out_stride + k]` = the dot of Q6_K weight row `r` (`n_rows` rows of `nb`
/// super-blocks in `w`) with the Q8_K activation row `acts[k]`. Callers check the features
/// (`avx512_rows::available`) and the lengths.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn q6_k_rows_multi<const K: usize>(
    w: &[u8],
    n_rows: usize,
    acts: [&[u8]; K],
    nb: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    debug_assert!(w.len() >= n_rows * nb * W_BYTES);
    debug_assert!(acts.iter().all(|a| a.len() >= nb * A_BYTES));
    debug_assert!(n_rows == 0 || out.len() >= (n_rows - 1) * out_stride + K);
    // After `vpmaddubsw`, i16 lane l of register g holds elements 64g + 2l and 64g + 2l + 1,
    // of 16-element group 4g + l / 8: these indices pick that group's scale.
    let spread: [__m512i; 4] = std::array::from_fn(|g| {
        let lanes: [i16; 32] = std::array::from_fn(|l| (4 * g + l / 8) as i16);
        _mm512_loadu_si512(lanes.as_ptr() as *const _)
    });
    let row_bytes = nb * W_BYTES;
    let py = acts.map(|a| a.as_ptr());
    for r in 0..n_rows {
        let x = w.as_ptr().add(r * row_bytes);
        prefetch_row(w.as_ptr(), r + PREFETCH_ROWS, n_rows, row_bytes);
        let mut sum = [0f32; K];
        for i in 0..nb {
            let bw = x.add(i * W_BYTES);
            let sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(bw.add(192) as *const __m128i));
            let sc_all = _mm512_castsi256_si512(sc16);
            let sc = spread.map(|s| _mm512_permutexvar_epi16(s, sc_all));
            let (lo, hi) = (q6_k_half(bw, 0), q6_k_half(bw, 1));
            let join =
                |a: __m256i, b: __m256i| _mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), b);
            let q = [
                join(lo[0], lo[1]),
                join(lo[2], lo[3]),
                join(hi[0], hi[1]),
                join(hi[2], hi[3]),
            ];
            let dw = f16_at(bw.add(208));
            for (k, sum) in sum.iter_mut().enumerate() {
                let ba = py[k].add(i * A_BYTES);
                let mut acc = _mm512_setzero_si512();
                for g in 0..4 {
                    let a = _mm512_loadu_si512(ba.add(4 + 64 * g) as *const _);
                    // u6 · i8 pairs fit i16 (2 · 63 · 128).
                    let p = _mm512_madd_epi16(_mm512_maddubs_epi16(q[g], a), sc[g]);
                    acc = _mm512_add_epi32(acc, p);
                }
                // Σ (q - 32) · a = Σ q · a - 32 · Σ scale · bsum, per 16-element group.
                let bsums = _mm256_loadu_si256(ba.add(260) as *const __m256i);
                let corr = _mm256_slli_epi32::<5>(_mm256_madd_epi16(sc16, bsums));
                let acc = _mm256_add_epi32(
                    _mm512_castsi512_si256(acc),
                    _mm512_extracti64x4_epi64::<1>(acc),
                );
                let sumi = hsum_epi32(_mm256_sub_epi32(acc, corr));
                *sum += f32_at(ba) * dw * sumi as f32;
            }
        }
        out.get_unchecked_mut(r * out_stride..r * out_stride + K)
            .copy_from_slice(&sum);
    }
}

/// Bytes of a Q4_K block.
const W4_BYTES: usize = 144;

/// [`q6_k_rows_multi`] for Q4_K weights: each token's float step is the one-row kernel's
/// (`sum += d_a · d · sumi - d_a · dmin · summ`).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn q4_k_rows_multi<const K: usize>(
    w: &[u8],
    n_rows: usize,
    acts: [&[u8]; K],
    nb: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    debug_assert!(w.len() >= n_rows * nb * W4_BYTES);
    debug_assert!(acts.iter().all(|a| a.len() >= nb * A_BYTES));
    debug_assert!(n_rows == 0 || out.len() >= (n_rows - 1) * out_stride + K);
    // Register c holds elements 64c.. (the low nibbles of 32 bytes, then their high nibbles):
    // 32-element groups 2c and 2c + 1, so i16 lane l takes the scale of group 2c + l / 16.
    let spread: [__m512i; 4] = std::array::from_fn(|c| {
        let lanes: [i16; 32] = std::array::from_fn(|l| (2 * c + l / 16) as i16);
        _mm512_loadu_si512(lanes.as_ptr() as *const _)
    });
    let low = _mm256_set1_epi8(0x0F);
    let row_bytes = nb * W4_BYTES;
    let py = acts.map(|a| a.as_ptr());
    for r in 0..n_rows {
        let x = w.as_ptr().add(r * row_bytes);
        prefetch_row(w.as_ptr(), r + PREFETCH_ROWS, n_rows, row_bytes);
        let mut sum = [0f32; K];
        for i in 0..nb {
            let bw = x.add(i * W4_BYTES);
            let (sc, mn) = scale_min_words(bw.add(4));
            // The 8 scale bytes as i16 (lanes 0..8, repeated), then spread per register.
            let sc_all = _mm512_cvtepu8_epi16(_mm256_set1_epi64x(sc as i64));
            let scales = spread.map(|s| _mm512_permutexvar_epi16(s, sc_all));
            let q: [__m512i; 4] = std::array::from_fn(|c| {
                let raw = _mm256_loadu_si256(bw.add(16 + 32 * c) as *const __m256i);
                let lo = _mm256_and_si256(raw, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low);
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
            });
            let (d, dmin) = (f16_at(bw), f16_at(bw.add(2)));
            for (k, sum) in sum.iter_mut().enumerate() {
                let ba = py[k].add(i * A_BYTES);
                let mut acc = _mm512_setzero_si512();
                for c in 0..4 {
                    let a = _mm512_loadu_si512(ba.add(4 + 64 * c) as *const _);
                    // u4 · i8 pairs fit i16 (2 · 15 · 128).
                    let p = _mm512_madd_epi16(_mm512_maddubs_epi16(q[c], a), scales[c]);
                    acc = _mm512_add_epi32(acc, p);
                }
                let acc = _mm256_add_epi32(
                    _mm512_castsi512_si256(acc),
                    _mm512_extracti64x4_epi64::<1>(acc),
                );
                let sumi = hsum_epi32(acc);
                let summ = k_min_sum(ba, mn);
                let da = f32_at(ba);
                *sum += da * d * sumi as f32 - da * dmin * summ as f32;
            }
        }
        out.get_unchecked_mut(r * out_stride..r * out_stride + K)
            .copy_from_slice(&sum);
    }
}
