//! wasm simd128 building blocks shared by the `wasm_*` kernels, and their dispatch.
//!
//! wasm has no run-time feature detection: these modules exist only in builds with
//! `-C target-feature=+simd128` (scripts/build-web.sh), where every function may use it.
//! Each kernel sums a block's integer products exactly, then does the block's float
//! arithmetic in the same operations and order as the portable kernel in `scalar.rs`, so the
//! results are bit-identical to it (tested in `wasm_tests.rs`, run under node).

use core::arch::wasm32::*;

use super::wasm_rows::{self, RowsFn};
use super::{wasm_act, wasm_kquant, wasm_legacy, KernelFn};
use crate::dtype::GgmlType;

/// The simd128 kernel for weights of type `w`, if there is one.
pub(super) fn kernel(w: GgmlType) -> Option<KernelFn> {
    use GgmlType::*;
    Some(match w {
        Q4_0 => wasm_legacy::q4_0_q8_0,
        Q4_1 => wasm_legacy::q4_1_q8_1,
        Q5_0 => wasm_legacy::q5_0_q8_0,
        Q5_1 => wasm_legacy::q5_1_q8_1,
        Q8_0 => wasm_legacy::q8_0_q8_0,
        IQ4_NL => wasm_legacy::iq4_nl_q8_0,
        Q4_K => wasm_kquant::q4_k_q8_k,
        Q5_K => wasm_kquant::q5_k_q8_k,
        Q6_K => wasm_kquant::q6_k_q8_k,
        _ => return None,
    })
}

/// The simd128 4-row kernel for weights of type `w`, if there is one.
pub(super) fn rows_kernel(w: GgmlType) -> Option<RowsFn> {
    use GgmlType::*;
    Some(match w {
        Q4_0 => wasm_rows::rows_q4_0_q8_0,
        Q4_1 => wasm_rows::rows_q4_1_q8_1,
        Q5_0 => wasm_rows::rows_q5_0_q8_0,
        Q8_0 => wasm_rows::rows_q8_0_q8_0,
        _ => return None,
    })
}

/// Quantizes `x` into `dst` as Q8_0, Q8_1 or Q8_K with simd128 (bit-identical to `act.rs`);
/// false for other types. Lengths were checked by the caller.
pub(super) fn quantize_activation(at: GgmlType, x: &[f32], dst: &mut [u8]) -> bool {
    match at {
        GgmlType::Q8_0 => wasm_act::quantize_q8_0(x, dst),
        GgmlType::Q8_1 => wasm_act::quantize_q8_1(x, dst),
        GgmlType::Q8_K => wasm_act::quantize_q8_k(x, dst),
        _ => return false,
    }
    true
}

/// 16 bytes at `p` (wasm loads need no alignment).
///
/// # Safety
/// `p..p + 16` must be readable.
#[inline(always)]
pub(super) unsafe fn load(p: *const u8) -> v128 {
    v128_load(p as *const v128)
}

/// Products of the signed bytes of `x` and `y`, summed in pairs into 8 i16 lanes then in
/// pairs again into 4 i32 lanes: exact for any bytes (a product is at most 2^14).
#[inline(always)]
pub(super) fn dot_i8(x: v128, y: v128) -> v128 {
    let lo = i32x4_extadd_pairwise_i16x8(i16x8_extmul_low_i8x16(x, y));
    let hi = i32x4_extadd_pairwise_i16x8(i16x8_extmul_high_i8x16(x, y));
    i32x4_add(lo, hi)
}

/// Signed byte products of two 16-byte pairs, `x0 * y0 + x1 * y1`, summed into 8 i16 lanes
/// (4 products each). Only for weights small enough that 4 products fit i16: |x| <= 16
/// with any i8 `y` (4 * 16 * 128 = 8192), or unsigned 6-bit weights against two vectors
/// instead of four (callers say which).
#[inline(always)]
pub(super) fn dot_small_i16(x0: v128, y0: v128, x1: v128, y1: v128) -> v128 {
    let a = i16x8_add(
        i16x8_extmul_low_i8x16(x0, y0),
        i16x8_extmul_high_i8x16(x0, y0),
    );
    let b = i16x8_add(
        i16x8_extmul_low_i8x16(x1, y1),
        i16x8_extmul_high_i8x16(x1, y1),
    );
    i16x8_add(a, b)
}

/// Sum of the 4 i32 lanes (wrapping, like the portable i32 sums never need to).
#[inline(always)]
pub(super) fn hsum_i32(v: v128) -> i32 {
    i32x4_extract_lane::<0>(v)
        .wrapping_add(i32x4_extract_lane::<1>(v))
        .wrapping_add(i32x4_extract_lane::<2>(v))
        .wrapping_add(i32x4_extract_lane::<3>(v))
}

/// The low and high nibbles of 16 packed bytes at `p`, as two vectors of bytes 0..=15.
///
/// # Safety
/// `p..p + 16` must be readable.
#[inline(always)]
pub(super) unsafe fn nibbles(p: *const u8) -> (v128, v128) {
    let raw = load(p);
    (v128_and(raw, u8x16_splat(0x0F)), u8x16_shr(raw, 4))
}

/// The 32 bits of the little-endian u32 `word` spread to bytes, 0xFF where a bit is set:
/// bits 0..16 in the first vector, 16..32 in the second.
#[inline(always)]
pub(super) fn bits_to_bytes(word: u32) -> (v128, v128) {
    let w = u32x4_splat(word);
    let bit = u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    let spread = |idx: v128| {
        let b = v128_and(i8x16_swizzle(w, idx), bit);
        i8x16_eq(b, bit)
    };
    (
        spread(u8x16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)),
        spread(u8x16(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3)),
    )
}

/// The little-endian u32 at `b[i..i + 4]`.
#[inline(always)]
pub(super) fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}
