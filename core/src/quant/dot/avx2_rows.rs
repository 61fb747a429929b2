//! AVX2 kernels for a batched decode step: many consecutive weight rows of a 32-element type
//! (Q8_0, Q4_0, Q5_0) dotted with `K` activation rows at once, for CPUs without the AVX-512
//! row kernels (`avx512_rows`).
//!
//! What makes them cheaper per token than `avx2_multi`'s one-row-at-a-time kernels: the
//! activation rows are prepared once per call (per 32-element block: the quants, the scale
//! already in 8 f32 lanes, and for the nibble types a correction `-bias · Σ` per group of 4
//! quants), and the nibble types' weights are read as unsigned bytes `q + bias`, so a token
//! costs `vpmaddubsw`, `vpmaddwd` and one add instead of two sign operations, a half-float
//! load and a conversion. The integer sums are exact either way (at most 2·31·127 per `i16`
//! pair), and the float steps per token are those of the one-row kernels (`avx2_legacy`: even
//! and odd blocks in separate 8-lane accumulators, `d_w·d_a` times the block's sums by fused
//! multiply-add, one horizontal sum), so every (row, token) gets the bits the token alone gets.

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::avx2_util::{bits_to_bytes_32, f16x8_at, hsum_ps, nibbles_32, prefetch_row};

/// How a weight type's blocks are read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Q8_0,
    Q4_0,
    Q5_0,
}

impl Kind {
    /// The kind of a weight type these kernels serve.
    pub(super) fn of(w: crate::dtype::GgmlType) -> Option<Kind> {
        use crate::dtype::GgmlType;
        match w {
            GgmlType::Q8_0 => Some(Kind::Q8_0),
            GgmlType::Q4_0 => Some(Kind::Q4_0),
            GgmlType::Q5_0 => Some(Kind::Q5_0),
            _ => None,
        }
    }

    /// Bytes per weight block.
    fn size(self) -> usize {
        match self {
            Kind::Q8_0 => 34,
            Kind::Q4_0 => 18,
            Kind::Q5_0 => 22,
        }
    }

    /// What the unsigned weight bytes exceed the signed quants by (Q8_0's quants stay signed:
    /// `255 · 127` pairs would saturate `vpmaddubsw`).
    fn bias(self) -> i8 {
        match self {
            Kind::Q8_0 => 0,
            Kind::Q4_0 => 8,
            Kind::Q5_0 => 16,
        }
    }
}

/// One prepared activation block (Q8_0).
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct ActBlock {
    q: __m256i,
    corr: __m256i,
    d: __m256,
}

thread_local! {
    /// Prepared activation blocks, reused across calls on a thread.
    static PREPARED: RefCell<Vec<ActBlock>> = const { RefCell::new(Vec::new()) };
}

/// The most activation rows one call takes (two accumulators per token plus the block's
/// registers fill the 16 ymm registers AVX2 has).
pub(super) const MAX_TOKENS: usize = 4;

/// `out[r · out_stride + k]` = the dot of weight row `r` (`n_rows` rows of `nb` blocks of
/// `kind`, one after another in `w`) with the Q8_0 activation row `acts[k]`. Callers check
/// AVX2, FMA and F16C and the lengths.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn rows_multi<const K: usize>(
    kind: Kind,
    w: &[u8],
    n_rows: usize,
    acts: [&[u8]; K],
    nb: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    debug_assert!(K <= MAX_TOKENS);
    debug_assert!(w.len() >= n_rows * nb * kind.size());
    debug_assert!(n_rows == 0 || out.len() >= (n_rows - 1) * out_stride + K);
    // Token k's blocks at [k · nb, (k + 1) · nb) of the thread's reused buffer, taken out of
    // the thread-local for the call (the loop must run in this function's body, where the
    // target features apply).
    let mut prepared = PREPARED.with(|p| std::mem::take(&mut *p.borrow_mut()));
    prepared.clear();
    for act in acts {
        prepare(kind, act, nb, &mut prepared);
    }
    let all = &prepared[..];
    let row_bytes = nb * kind.size();
    for r in 0..n_rows {
        let x = w.as_ptr().add(r * row_bytes);
        prefetch_row(w.as_ptr(), r + PREFETCH_ROWS, n_rows, row_bytes);
        let v: [f32; K] = match kind {
            Kind::Q8_0 => signed_row::<K>(x, all, nb),
            Kind::Q4_0 => biased_row::<K>(x, all, nb, 18, |b| nibbles_32(b.add(2))),
            Kind::Q5_0 => biased_row::<K>(x, all, nb, 22, |b| {
                let fifth = _mm256_and_si256(bits_to_bytes_32(b.add(2)), _mm256_set1_epi8(0x10));
                _mm256_or_si256(nibbles_32(b.add(6)), fifth)
            }),
        };
        out.get_unchecked_mut(r * out_stride..r * out_stride + K)
            .copy_from_slice(&v);
    }
    PREPARED.with(|p| *p.borrow_mut() = prepared);
}

/// Rows ahead whose bytes are requested before they are read.
const PREFETCH_ROWS: usize = 4;

/// Appends the prepared blocks of the Q8_0 row `act` to `dst`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn prepare(kind: Kind, act: &[u8], nb: usize, dst: &mut Vec<ActBlock>) {
    debug_assert!(act.len() >= nb * 34);
    let bias = _mm256_set1_epi8(kind.bias());
    let ones = _mm256_set1_epi16(1);
    for i in 0..nb {
        let ba = act.as_ptr().add(i * 34);
        let q = _mm256_loadu_si256(ba.add(2) as *const __m256i);
        let sum = _mm256_madd_epi16(_mm256_maddubs_epi16(bias, q), ones);
        dst.push(ActBlock {
            q,
            corr: _mm256_sub_epi32(_mm256_setzero_si256(), sum),
            d: f16x8_at(ba),
        });
    }
}

/// One row of a type read as `q + bias` against `K` prepared activation rows.
#[inline(always)]
unsafe fn biased_row<const K: usize>(
    x: *const u8,
    acts: &[ActBlock],
    nb: usize,
    size: usize,
    quants: impl Fn(*const u8) -> __m256i,
) -> [f32; K] {
    let ones = _mm256_set1_epi16(1);
    // Even and odd blocks in two named accumulator sets (kept in registers); a macro rather
    // than a closure so that the intrinsics stay inlined in the caller's target features.
    macro_rules! block {
        ($i:expr, $acc:ident) => {{
            let i = $i;
            let bw = x.add(i * size);
            let dw = f16x8_at(bw);
            let u = quants(bw);
            for (k, acc) in $acc.iter_mut().enumerate() {
                let a = acts.get_unchecked(k * nb + i);
                let d = _mm256_mul_ps(dw, a.d);
                let s = _mm256_madd_epi16(_mm256_maddubs_epi16(u, a.q), ones);
                let p = _mm256_add_epi32(s, a.corr);
                *acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), *acc);
            }
        }};
    }
    let (mut acc0, mut acc1) = ([_mm256_setzero_ps(); K], [_mm256_setzero_ps(); K]);
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

/// One Q8_0 row against `K` prepared activation rows (signed quants: the sign trick of
/// `avx2_util::dot_i8_i8`, the weight's absolute values shared by the tokens).
#[inline(always)]
unsafe fn signed_row<const K: usize>(x: *const u8, acts: &[ActBlock], nb: usize) -> [f32; K] {
    let ones = _mm256_set1_epi16(1);
    macro_rules! block {
        ($i:expr, $acc:ident) => {{
            let i = $i;
            let bw = x.add(i * 34);
            let dw = f16x8_at(bw);
            let q = _mm256_loadu_si256(bw.add(2) as *const __m256i);
            let q_abs = _mm256_sign_epi8(q, q);
            for (k, acc) in $acc.iter_mut().enumerate() {
                let a = acts.get_unchecked(k * nb + i);
                let d = _mm256_mul_ps(dw, a.d);
                let s = _mm256_sign_epi8(a.q, q);
                let p = _mm256_madd_epi16(_mm256_maddubs_epi16(q_abs, s), ones);
                *acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), *acc);
            }
        }};
    }
    let (mut acc0, mut acc1) = ([_mm256_setzero_ps(); K], [_mm256_setzero_ps(); K]);
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
