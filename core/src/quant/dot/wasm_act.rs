//! wasm simd128 quantization of activation rows to Q8_0, Q8_1 and Q8_K, bit-identical to the
//! portable `act.rs`: the same absolute maximum (pseudo-max ignores NaN as `f32::max` does),
//! the same scalar inverse scale, then per element the same multiply, round half to even
//! (`f32x4_nearest`), clamp (NaN-propagating min/max, NaN converting to 0 as `as i32` does)
//! and conversion.

use core::arch::wasm32::*;

use super::super::float::f16_bytes;
use super::wasm_util::hsum_i32;

/// The inverse scale of a block with largest magnitude `amax` (0 for an all-zero block).
fn inverse_scale(amax: f32) -> f32 {
    if amax == 0.0 {
        0.0
    } else {
        127.0 / amax
    }
}

/// Four f32 at `x[i..i + 4]`.
#[inline(always)]
fn load4(x: &[f32], i: usize) -> v128 {
    let s = &x[i..i + 4];
    // SAFETY: `s` is 4 readable f32 (16 bytes); wasm loads need no alignment.
    unsafe { v128_load(s.as_ptr() as *const v128) }
}

/// Largest |x|, 0 for an empty or all-NaN block, like `act.rs`'s fold with `f32::max`.
#[inline(always)]
fn absmax(x: &[f32]) -> f32 {
    let mut m = f32x4_splat(0.0);
    for i in (0..x.len()).step_by(4) {
        // pmax(m, v) = if m < v { v } else { m }: a NaN v leaves m.
        m = f32x4_pmax(m, f32x4_abs(load4(x, i)));
    }
    f32x4_extract_lane::<0>(m)
        .max(f32x4_extract_lane::<1>(m))
        .max(f32x4_extract_lane::<2>(m))
        .max(f32x4_extract_lane::<3>(m))
}

/// 16 elements from `x[i..]` quantized with inverse scale `id` into `q`; returns their i32
/// quants summed in 4 lanes.
#[inline(always)]
fn quant16(x: &[f32], i: usize, id: v128, q: &mut [u8]) -> v128 {
    let (lo, hi) = (f32x4_splat(-127.0), f32x4_splat(127.0));
    let r = |k: usize| {
        let v = f32x4_nearest(f32x4_mul(load4(x, i + 4 * k), id));
        i32x4_trunc_sat_f32x4(f32x4_min(f32x4_max(v, lo), hi))
    };
    let (r0, r1, r2, r3) = (r(0), r(1), r(2), r(3));
    // Values are within +-127: the saturating narrows are exact.
    let bytes = i8x16_narrow_i16x8(i16x8_narrow_i32x4(r0, r1), i16x8_narrow_i32x4(r2, r3));
    let q = &mut q[..16];
    // SAFETY: `q` is 16 writable bytes.
    unsafe { v128_store(q.as_mut_ptr() as *mut v128, bytes) };
    i32x4_add(i32x4_add(r0, r1), i32x4_add(r2, r3))
}

/// Q8_0: blocks of 32, scale amax/127 as f16, then 32 quants.
pub(super) fn quantize_q8_0(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.chunks_exact(32).zip(dst.chunks_exact_mut(34)) {
        let amax = absmax(xb);
        let id = f32x4_splat(inverse_scale(amax));
        quant16(xb, 0, id, &mut b[2..18]);
        quant16(xb, 16, id, &mut b[18..34]);
        b[0..2].copy_from_slice(&f16_bytes(amax / 127.0));
    }
}

/// Q8_1: as Q8_0 plus d·Σq as f16.
pub(super) fn quantize_q8_1(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.chunks_exact(32).zip(dst.chunks_exact_mut(36)) {
        let amax = absmax(xb);
        let id = f32x4_splat(inverse_scale(amax));
        let s0 = quant16(xb, 0, id, &mut b[4..20]);
        let s1 = quant16(xb, 16, id, &mut b[20..36]);
        let sum = hsum_i32(i32x4_add(s0, s1));
        let d = amax / 127.0;
        b[0..2].copy_from_slice(&f16_bytes(d));
        b[2..4].copy_from_slice(&f16_bytes(d * sum as f32));
    }
}

/// Q8_K: blocks of 256, f32 scale 1/iscale, 256 quants, 16 sums of 16 quants (i16).
pub(super) fn quantize_q8_k(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.chunks_exact(256).zip(dst.chunks_exact_mut(292)) {
        let iscale = inverse_scale(absmax(xb));
        let d = if iscale == 0.0 { 0.0 } else { 1.0 / iscale };
        b[0..4].copy_from_slice(&d.to_le_bytes());
        let id = f32x4_splat(iscale);
        for g in 0..16 {
            let s = quant16(xb, 16 * g, id, &mut b[4 + 16 * g..4 + 16 * (g + 1)]);
            b[260 + 2 * g..262 + 2 * g].copy_from_slice(&(hsum_i32(s) as i16).to_le_bytes());
        }
    }
}
