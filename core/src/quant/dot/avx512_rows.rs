//! Row kernels for token generation on CPUs with AVX-512 (BW, VL, VNNI): many consecutive
//! weight rows dotted with one activation row, in 256-bit registers (which keep three vector
//! ports busy where 512-bit ones would leave two).
//!
//! The activation row is prepared once per call: per 32-element block its quants, its scale
//! in 8 lanes, and a correction `-bias · Σ` of each group of 4 quants. Weight quants are then
//! read as unsigned bytes `q + bias` (Q8_0: `q ^ 0x80`; Q4_0: the nibble; Q5_0: the nibble
//! with its fifth bit), so one `vpdpbusd` started from the correction gives the signed
//! integer sums directly (exact: at most 4·255·128 per lane). Per row the float work and its
//! order are those of the one-row kernels (`avx2_legacy`: even and odd blocks in separate
//! 8-lane accumulators, `d_w·d_a` times the block's integer sums by fused multiply-add, then
//! one horizontal sum), so every row gets exactly the bits of [`super::vec_dot`].

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::avx2_util::{f16x8_at, hsum_ps, nibbles_32, prefetch_row};

/// Whether this CPU has everything these kernels use (and `WEFT_DOT_KERNELS=avx2` does not
/// ask for the AVX2 ones instead, for comparisons).
pub(super) fn available() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        std::env::var("WEFT_DOT_KERNELS").as_deref() != Ok("avx2")
            && super::has_avx2()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vnni")
    })
}

/// One prepared activation block.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct ActBlock {
    q: __m256i,
    corr: __m256i,
    d: __m256,
    /// Q8_1 only: the stored `d · Σq`, in 8 lanes.
    s: __m256,
}

thread_local! {
    /// Prepared activation blocks, reused across calls on a thread.
    static PREPARED: RefCell<Vec<ActBlock>> = const { RefCell::new(Vec::new()) };
}

/// How a weight type's blocks are read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Q8_0,
    Q4_0,
    Q5_0,
    Q4_1,
}

impl Kind {
    /// The kind of a weight type these kernels serve.
    pub(super) fn of(w: crate::dtype::GgmlType) -> Option<Kind> {
        use crate::dtype::GgmlType;
        match w {
            GgmlType::Q8_0 => Some(Kind::Q8_0),
            GgmlType::Q4_0 => Some(Kind::Q4_0),
            GgmlType::Q5_0 => Some(Kind::Q5_0),
            GgmlType::Q4_1 => Some(Kind::Q4_1),
            _ => None,
        }
    }

    /// Bytes per weight block.
    pub(super) fn size(self) -> usize {
        match self {
            Kind::Q8_0 => 34,
            Kind::Q4_0 => 18,
            Kind::Q5_0 => 22,
            Kind::Q4_1 => 20,
        }
    }

    /// What the unsigned weight bytes exceed the signed quants by.
    pub(super) fn bias(self) -> u8 {
        match self {
            Kind::Q8_0 => 128,
            Kind::Q4_0 => 8,
            Kind::Q5_0 => 16,
            Kind::Q4_1 => 0,
        }
    }
}

/// `out[r · out_stride]` = the dot of weight row `r` (`n_rows` rows of `nb` blocks of
/// `kind`, one after another in `w`) with the activation row `act` (Q8_0 blocks, or Q8_1 for
/// Q4_1). Callers check the features ([`available`]) and the lengths.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn rows(
    kind: Kind,
    w: &[u8],
    n_rows: usize,
    act: &[u8],
    nb: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    debug_assert!(w.len() >= n_rows * nb * kind.size());
    debug_assert!(n_rows == 0 || out.len() > (n_rows - 1) * out_stride);
    // The buffer is taken out of the thread-local for the call (the loop must run in this
    // function's body, where the target features apply, not in a closure).
    let mut prepared = PREPARED.with(|p| std::mem::take(&mut *p.borrow_mut()));
    prepared.clear();
    prepare(kind, act, nb, &mut prepared);
    let acts = &prepared[..nb];
    let row_bytes = nb * kind.size();
    for r in 0..n_rows {
        let x = w.as_ptr().add(r * row_bytes);
        prefetch_row(w.as_ptr(), r + PREFETCH_ROWS, n_rows, row_bytes);
        *out.get_unchecked_mut(r * out_stride) = match kind {
            Kind::Q8_0 => row_biased(x, acts, 34, |b| {
                _mm256_xor_si256(
                    _mm256_loadu_si256(b.add(2) as *const __m256i),
                    _mm256_set1_epi8(-128),
                )
            }),
            Kind::Q4_0 => row_biased(x, acts, 18, |b| nibbles_32(b.add(2))),
            Kind::Q5_0 => row_biased(x, acts, 22, |b| {
                let fifth = (b.add(2) as *const u32).read_unaligned();
                let nib = nibbles_32(b.add(6));
                _mm256_mask_add_epi8(nib, fifth, nib, _mm256_set1_epi8(0x10))
            }),
            Kind::Q4_1 => row_q4_1(x, acts),
        };
    }
    PREPARED.with(|p| *p.borrow_mut() = prepared);
}

/// The most activation rows one call of [`rows_multi`] takes: each weight block is read and
/// unpacked once for up to this many tokens (sixteen: `avx512_pairs` keeps one 16-lane
/// accumulator per token, so they and the block fill 20 of the 32 registers).
pub(super) const MAX_TOKENS: usize = 16;

/// [`rows`] for `K` (≤ [`MAX_TOKENS`]) activation rows at once (a batched decode step):
/// `out[r · out_stride + k]` = the dot of weight row `r` with `acts[k]`. Each (row, token)
/// gets the bits [`rows`] gives it: the same float steps per token, only the weight block's
/// loads and unpacking are shared.
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
    debug_assert!(w.len() >= n_rows * nb * kind.size());
    debug_assert!(K <= MAX_TOKENS);
    debug_assert!(n_rows == 0 || out.len() >= (n_rows - 1) * out_stride + K);
    if kind != Kind::Q4_1 {
        return super::avx512_pairs::rows_multi(kind, w, n_rows, acts, nb, out, out_stride);
    }
    // Token k's blocks at [k · nb, (k + 1) · nb) of the thread's reused buffer.
    let mut prepared = PREPARED.with(|p| std::mem::take(&mut *p.borrow_mut()));
    prepared.clear();
    for act in acts {
        prepare(kind, act, nb, &mut prepared);
    }
    let all = &prepared[..];
    let row_bytes = nb * kind.size();
    for r in 0..n_rows {
        let x = w.as_ptr().add(r * row_bytes);
        let v = match kind {
            Kind::Q8_0 => rows_biased_multi(x, all, nb, 34, |b| {
                _mm256_xor_si256(
                    _mm256_loadu_si256(b.add(2) as *const __m256i),
                    _mm256_set1_epi8(-128),
                )
            }),
            Kind::Q4_0 => rows_biased_multi(x, all, nb, 18, |b| nibbles_32(b.add(2))),
            Kind::Q5_0 => rows_biased_multi(x, all, nb, 22, |b| {
                let fifth = (b.add(2) as *const u32).read_unaligned();
                let nib = nibbles_32(b.add(6));
                _mm256_mask_add_epi8(nib, fifth, nib, _mm256_set1_epi8(0x10))
            }),
            Kind::Q4_1 => {
                let mut v = [0f32; K];
                for (k, v) in v.iter_mut().enumerate() {
                    *v = row_q4_1(x, &all[k * nb..(k + 1) * nb]);
                }
                v
            }
        };
        out.get_unchecked_mut(r * out_stride..r * out_stride + K)
            .copy_from_slice(&v);
    }
    PREPARED.with(|p| *p.borrow_mut() = prepared);
}

/// One row against `K` prepared activation rows (`acts[k · nb + i]`: token k's block i): per
/// token, the float steps of [`row_biased`].
#[inline(always)]
unsafe fn rows_biased_multi<const K: usize>(
    x: *const u8,
    acts: &[ActBlock],
    nb: usize,
    size: usize,
    quants: impl Fn(*const u8) -> __m256i,
) -> [f32; K] {
    // Even and odd blocks in two named accumulator sets (not one array indexed by parity,
    // which would keep them in memory rather than in registers); a macro rather than a
    // closure so that the intrinsics stay inlined in this function's target features.
    macro_rules! block {
        ($i:expr, $acc:ident) => {{
            let i = $i;
            let bw = x.add(i * size);
            let dw = f16x8_at(bw);
            let q = quants(bw);
            for (k, acc) in $acc.iter_mut().enumerate() {
                let a = acts.get_unchecked(k * nb + i);
                let d = _mm256_mul_ps(dw, a.d);
                let p = _mm256_dpbusd_epi32(a.corr, q, a.q);
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

/// Rows ahead whose bytes are requested before they are read.
const PREFETCH_ROWS: usize = 4;

/// Appends the prepared blocks of `act` to `dst`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn prepare(kind: Kind, act: &[u8], nb: usize, dst: &mut Vec<ActBlock>) {
    let (size, q_at) = if kind == Kind::Q4_1 { (36, 4) } else { (34, 2) };
    debug_assert!(act.len() >= nb * size);
    let bias = _mm256_set1_epi8(kind.bias() as i8);
    for i in 0..nb {
        let ba = act.as_ptr().add(i * size);
        let q = _mm256_loadu_si256(ba.add(q_at) as *const __m256i);
        let sum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias, q);
        dst.push(ActBlock {
            q,
            corr: _mm256_sub_epi32(_mm256_setzero_si256(), sum),
            d: f16x8_at(ba),
            s: if kind == Kind::Q4_1 {
                f16x8_at(ba.add(2))
            } else {
                _mm256_setzero_ps()
            },
        });
    }
}

/// One row of a type whose quants are read as `q + bias`: the float steps of
/// `avx2_legacy::with_q8_0`.
#[inline(always)]
unsafe fn row_biased(
    x: *const u8,
    acts: &[ActBlock],
    size: usize,
    quants: impl Fn(*const u8) -> __m256i,
) -> f32 {
    let block = |i: usize, acc: __m256| {
        let bw = x.add(i * size);
        let a = acts.get_unchecked(i);
        let d = _mm256_mul_ps(f16x8_at(bw), a.d);
        let p = _mm256_dpbusd_epi32(a.corr, quants(bw), a.q);
        _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc)
    };
    let nb = acts.len();
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 2 <= nb {
        acc0 = block(i, acc0);
        acc1 = block(i + 1, acc1);
        i += 2;
    }
    if i < nb {
        acc0 = block(i, acc0);
    }
    hsum_ps(_mm256_add_ps(acc0, acc1))
}

/// One Q4_1 row: the float steps of `avx2_legacy::q4_1_q8_1`.
#[inline(always)]
unsafe fn row_q4_1(x: *const u8, acts: &[ActBlock]) -> f32 {
    let block = |i: usize, acc: __m256, mins: __m256| {
        let bw = x.add(i * 20);
        let a = acts.get_unchecked(i);
        let d = _mm256_mul_ps(f16x8_at(bw), a.d);
        let mins = _mm256_fmadd_ps(f16x8_at(bw.add(2)), a.s, mins);
        let p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), nibbles_32(bw.add(4)), a.q);
        (_mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc), mins)
    };
    let nb = acts.len();
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let (mut min0, mut min1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 2 <= nb {
        (acc0, min0) = block(i, acc0, min0);
        (acc1, min1) = block(i + 1, acc1, min1);
        i += 2;
    }
    if i < nb {
        (acc0, min0) = block(i, acc0, min0);
    }
    let mins = _mm256_add_ps(min0, min1);
    hsum_ps(_mm256_add_ps(acc0, acc1)) + _mm_cvtss_f32(_mm256_castps256_ps128(mins))
}
