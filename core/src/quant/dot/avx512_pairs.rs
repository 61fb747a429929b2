//! The batched-decode row kernels of `avx512_rows` for the types read as `q + bias` (Q8_0,
//! Q4_0, Q5_0) in 512-bit registers: two consecutive weight blocks per register, the even one
//! in the low 8 lanes and the odd one in the high 8.
//!
//! The one-row kernel keeps even and odd blocks in two 8-lane accumulators and does, per block,
//! a scale product, a `vpdpbusd`, a conversion and a fused multiply-add. Here the low half of
//! one 16-lane accumulator is the even accumulator and the high half the odd one, and each
//! 16-lane instruction does the two blocks' 8-lane steps at once, lane for lane, so every
//! (row, token) keeps the one-row kernel's bits while a token costs half the instructions per
//! block (a batched step is bound by this float work, not by reading the weights).

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::avx2_util::{f16x8_at, hsum_ps, prefetch_row};
use super::avx512_rows::Kind;

/// Two consecutive prepared activation blocks (the second zero past the row's end).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct ActPair {
    q: __m512i,
    /// `-bias · Σ` of each group of 4 quants.
    corr: __m512i,
    /// Each block's scale in its 8 lanes.
    d: __m512,
}

/// Rows ahead whose bytes are requested before they are read.
const PREFETCH_ROWS: usize = 2;

thread_local! {
    /// Prepared activation pairs, reused across calls on a thread.
    static PAIRS: RefCell<Vec<ActPair>> = const { RefCell::new(Vec::new()) };
}

/// Joins two 8-lane halves.
#[inline(always)]
unsafe fn join_ps(lo: __m256, hi: __m256) -> __m512 {
    _mm512_castpd_ps(_mm512_insertf64x4::<1>(
        _mm512_castps_pd(_mm512_castps256_ps512(lo)),
        _mm256_castps_pd(hi),
    ))
}

#[inline(always)]
unsafe fn join_si(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// Appends the prepared pairs of the Q8_0 activation row `act` (`nb` blocks) to `dst`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn prepare(kind: Kind, act: &[u8], nb: usize, dst: &mut Vec<ActPair>) {
    debug_assert!(act.len() >= nb * 34);
    let bias = _mm512_set1_epi8(kind.bias() as i8);
    let block = |i: usize| {
        if i < nb {
            let ba = act.as_ptr().add(i * 34);
            (
                _mm256_loadu_si256(ba.add(2) as *const __m256i),
                f16x8_at(ba),
            )
        } else {
            (_mm256_setzero_si256(), _mm256_setzero_ps())
        }
    };
    for j in 0..nb.div_ceil(2) {
        let ((q0, d0), (q1, d1)) = (block(2 * j), block(2 * j + 1));
        let q = join_si(q0, q1);
        let sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, q);
        dst.push(ActPair {
            q,
            corr: _mm512_sub_epi32(_mm512_setzero_si512(), sum),
            d: join_ps(d0, d1),
        });
    }
}

/// `out[r · out_stride + k]` = the dot of weight row `r` (`n_rows` rows of `nb` blocks of
/// `kind`, not Q4_1) with `acts[k]` (Q8_0 rows), with the bits of `avx512_rows::rows`.
/// Callers check the features (`avx512_rows::available`) and the lengths.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn rows_multi<const K: usize>(
    kind: Kind,
    w: &[u8],
    n_rows: usize,
    acts: [&[u8]; K],
    nb: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    debug_assert!(kind != Kind::Q4_1);
    debug_assert!(w.len() >= n_rows * nb * kind.size());
    debug_assert!(n_rows == 0 || out.len() >= (n_rows - 1) * out_stride + K);
    let mut pairs = PAIRS.with(|p| std::mem::take(&mut *p.borrow_mut()));
    pairs.clear();
    for act in acts {
        prepare(kind, act, nb, &mut pairs);
    }
    let row_bytes = nb * kind.size();
    for r in 0..n_rows {
        let x = w.as_ptr().add(r * row_bytes);
        prefetch_row(w.as_ptr(), r + PREFETCH_ROWS, n_rows, row_bytes);
        let v = match kind {
            Kind::Q8_0 => row::<K>(x, &pairs, nb, 34, |b| {
                _mm256_xor_si256(
                    _mm256_loadu_si256(b.add(2) as *const __m256i),
                    _mm256_set1_epi8(-128),
                )
            }),
            Kind::Q4_0 => row::<K>(x, &pairs, nb, 18, |b| {
                super::avx2_util::nibbles_32(b.add(2))
            }),
            Kind::Q5_0 => row::<K>(x, &pairs, nb, 22, |b| {
                let fifth = (b.add(2) as *const u32).read_unaligned();
                let nib = super::avx2_util::nibbles_32(b.add(6));
                _mm256_mask_add_epi8(nib, fifth, nib, _mm256_set1_epi8(0x10))
            }),
            Kind::Q4_1 => unreachable!("Q4_1 has its own kernel"),
        };
        out.get_unchecked_mut(r * out_stride..r * out_stride + K)
            .copy_from_slice(&v);
    }
    PAIRS.with(|p| *p.borrow_mut() = pairs);
}

/// One row against `K` prepared activation rows (`pairs[k · np + j]`: token k's pair j).
#[inline(always)]
unsafe fn row<const K: usize>(
    x: *const u8,
    pairs: &[ActPair],
    nb: usize,
    size: usize,
    quants: impl Fn(*const u8) -> __m256i,
) -> [f32; K] {
    let np = nb.div_ceil(2);
    let mut acc = [_mm512_setzero_ps(); K];
    for j in 0..nb / 2 {
        let b0 = x.add(2 * j * size);
        let b1 = b0.add(size);
        let q = join_si(quants(b0), quants(b1));
        let dw = join_ps(f16x8_at(b0), f16x8_at(b1));
        for (k, acc) in acc.iter_mut().enumerate() {
            let a = pairs.get_unchecked(k * np + j);
            let d = _mm512_mul_ps(dw, a.d);
            let p = _mm512_dpbusd_epi32(a.corr, q, a.q);
            *acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), *acc);
        }
    }
    if nb % 2 == 1 {
        // The last, even block: the low half only (the odd accumulator is left as it is).
        let j = nb / 2;
        let b0 = x.add(2 * j * size);
        let q = _mm512_zextsi256_si512(quants(b0));
        let dw = _mm512_zextps256_ps512(f16x8_at(b0));
        for (k, acc) in acc.iter_mut().enumerate() {
            let a = pairs.get_unchecked(k * np + j);
            let d = _mm512_mul_ps(dw, a.d);
            let p = _mm512_dpbusd_epi32(a.corr, q, a.q);
            *acc = _mm512_mask3_fmadd_ps(d, _mm512_cvtepi32_ps(p), *acc, 0x00ff);
        }
    }
    std::array::from_fn(|k| {
        let lo = _mm512_castps512_ps256(acc[k]);
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(acc[k])));
        hsum_ps(_mm256_add_ps(lo, hi))
    })
}
