//! wasm simd128 kernels for the 32-element formats against Q8_0 / Q8_1 activations. A block's
//! integer dot is exact; its float part is the portable kernel's expression, evaluated in the
//! same order (no FMA in simd128, and none in the portable code either), and blocks are
//! summed one after another as there, so results are bit-identical to `scalar.rs`. (The
//! x86 AVX2 kernels accumulate in 8 FMA lanes instead and differ from both in the last bits.)

use core::arch::wasm32::*;

use super::super::float::f16_at;
use super::super::iq4::IQ4_LEVELS;
use super::wasm_util::*;

/// Shared loop for weights dotted with Q8_0 activations: `block_dot` gives the exact integer
/// dot of weight block `bw` with the 32 activation quants at `qa`.
#[inline(always)]
unsafe fn with_q8_0(
    w: &[u8],
    a: &[u8],
    nb: usize,
    size: usize,
    block_dot: impl Fn(&[u8], *const u8) -> i32,
) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(size).zip(a.chunks_exact(34)).take(nb) {
        let s = block_dot(bw, ba.as_ptr().add(2));
        sum += f16_at(bw, 0) * f16_at(ba, 0) * s as f32;
    }
    sum
}

/// Shared loop for weights dotted with Q8_1 activations (Q4_1, Q5_1): the block's min term
/// m_w * s_a is added as in the portable kernel.
#[inline(always)]
unsafe fn with_q8_1(
    w: &[u8],
    a: &[u8],
    nb: usize,
    size: usize,
    block_dot: impl Fn(&[u8], *const u8) -> i32,
) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(size).zip(a.chunks_exact(36)).take(nb) {
        let s = block_dot(bw, ba.as_ptr().add(4));
        sum += f16_at(bw, 0) * f16_at(ba, 0) * s as f32 + f16_at(bw, 2) * f16_at(ba, 2);
    }
    sum
}

/// Exact dot of two small-weight halves (elements 0..16 in `x0`, 16..32 in `x1`) with the
/// activation quants at `qa`; see [`dot_small_i16`] for the weight range.
#[inline(always)]
unsafe fn small_dot(x0: v128, x1: v128, qa: *const u8) -> i32 {
    let p = dot_small_i16(x0, load(qa), x1, load(qa.add(16)));
    hsum_i32(i32x4_extadd_pairwise_i16x8(p))
}

/// Q4_0 weights: nibble - 8, in -8..=7.
///
/// # Safety
/// simd128 only; `w` and `a` hold `nb` blocks (checked by `vec_dot`).
pub(super) unsafe fn q4_0_q8_0(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let eight = i8x16_splat(8);
    with_q8_0(w, a, nb, 18, |bw, qa| {
        let (lo, hi) = nibbles(bw.as_ptr().add(2));
        small_dot(i8x16_sub(lo, eight), i8x16_sub(hi, eight), qa)
    })
}

/// Q4_1 weights: plain nibbles, 0..=15.
///
/// # Safety
/// As [`q4_0_q8_0`].
pub(super) unsafe fn q4_1_q8_1(w: &[u8], a: &[u8], nb: usize) -> f32 {
    with_q8_1(w, a, nb, 20, |bw, qa| {
        let (lo, hi) = nibbles(bw.as_ptr().add(4));
        small_dot(lo, hi, qa)
    })
}

/// Q5_0 weights: five-bit q - 16 in -16..=15, as a signed byte: the nibble with 0xF0 or-ed
/// in where the fifth bit is clear.
///
/// # Safety
/// As [`q4_0_q8_0`].
pub(super) unsafe fn q5_0_q8_0(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let top = u8x16_splat(0xF0);
    with_q8_0(w, a, nb, 22, |bw, qa| {
        let (h0, h1) = bits_to_bytes(u32_at(bw, 2));
        let (lo, hi) = nibbles(bw.as_ptr().add(6));
        let x0 = v128_or(lo, v128_andnot(top, h0));
        let x1 = v128_or(hi, v128_andnot(top, h1));
        small_dot(x0, x1, qa)
    })
}

/// Q5_1 weights: five-bit q in 0..=31 (4 products of 31 * 128 still fit i16).
///
/// # Safety
/// As [`q4_0_q8_0`].
pub(super) unsafe fn q5_1_q8_1(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let fifth = u8x16_splat(0x10);
    with_q8_1(w, a, nb, 24, |bw, qa| {
        let (h0, h1) = bits_to_bytes(u32_at(bw, 4));
        let (lo, hi) = nibbles(bw.as_ptr().add(8));
        let x0 = v128_or(lo, v128_and(h0, fifth));
        let x1 = v128_or(hi, v128_and(h1, fifth));
        small_dot(x0, x1, qa)
    })
}

/// Q8_0 weights: any i8, so products are widened to i32 in pairs.
///
/// # Safety
/// As [`q4_0_q8_0`].
pub(super) unsafe fn q8_0_q8_0(w: &[u8], a: &[u8], nb: usize) -> f32 {
    with_q8_0(w, a, nb, 34, |bw, qa| {
        let p = bw.as_ptr().add(2);
        let s0 = dot_i8(load(p), load(qa));
        let s1 = dot_i8(load(p.add(16)), load(qa.add(16)));
        hsum_i32(i32x4_add(s0, s1))
    })
}

/// IQ4_NL weights: nibbles looked up in the 16 levels (within +-127, so widened in pairs).
///
/// # Safety
/// As [`q4_0_q8_0`].
pub(super) unsafe fn iq4_nl_q8_0(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let table = load(IQ4_LEVELS.as_ptr() as *const u8);
    with_q8_0(w, a, nb, 18, |bw, qa| {
        let (lo, hi) = nibbles(bw.as_ptr().add(2));
        let s0 = dot_i8(i8x16_swizzle(table, lo), load(qa));
        let s1 = dot_i8(i8x16_swizzle(table, hi), load(qa.add(16)));
        hsum_i32(i32x4_add(s0, s1))
    })
}
