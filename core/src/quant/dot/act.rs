//! Portable quantization of activation rows to Q8_0, Q8_1 and Q8_K, rounding as llama.cpp's
//! CPU backend does (inverse scale 127/amax, round half to even; Q8_K keeps 1/(127/amax) as
//! its f32 scale). Bit-identical to the AVX2 versions in `avx2_act.rs`, so every build (x86
//! without AVX2, ARM, wasm) gives the same numbers. The GGML reference quantizers used for
//! weights (`quant::quantize`) divide by d = amax/127 and round half away from zero instead.

use super::super::float::f16_bytes;

/// The inverse scale of a block with largest magnitude `amax` (0 for an all-zero block).
fn inverse_scale(amax: f32) -> f32 {
    if amax == 0.0 {
        0.0
    } else {
        127.0 / amax
    }
}

fn absmax(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |m, v| m.max(v.abs()))
}

/// One 32-element block: writes the quants, returns their sum.
fn block_i8(x: &[f32], id: f32, qs: &mut [u8]) -> i32 {
    let mut sum = 0;
    for (v, q) in x.iter().zip(qs.iter_mut()) {
        let r = (v * id).round_ties_even().clamp(-127.0, 127.0) as i32;
        sum += r;
        *q = r as i8 as u8;
    }
    sum
}

/// Q8_0: blocks of 32, scale amax/127 as f16, then 32 quants.
pub(super) fn quantize_q8_0(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.chunks_exact(32).zip(dst.chunks_exact_mut(34)) {
        let amax = absmax(xb);
        block_i8(xb, inverse_scale(amax), &mut b[2..34]);
        b[0..2].copy_from_slice(&f16_bytes(amax / 127.0));
    }
}

/// Q8_1: as Q8_0 plus d·Σq as f16 (the min term of Q4_1/Q5_1 dots).
pub(super) fn quantize_q8_1(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.chunks_exact(32).zip(dst.chunks_exact_mut(36)) {
        let amax = absmax(xb);
        let sum = block_i8(xb, inverse_scale(amax), &mut b[4..36]);
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
        for g in 0..16 {
            let sum = block_i8(
                &xb[16 * g..16 * (g + 1)],
                iscale,
                &mut b[4 + 16 * g..4 + 16 * (g + 1)],
            );
            b[260 + 2 * g..262 + 2 * g].copy_from_slice(&(sum as i16).to_le_bytes());
        }
    }
}
