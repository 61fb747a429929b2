//! Plain float element types: F32, F16 and BF16 (one element per "block").

use half::{bf16, f16};

/// Reads little-endian f32 values.
pub(crate) fn dequant_f32(src: &[u8], dst: &mut [f32]) {
    for (b, d) in src.chunks_exact(4).zip(dst.iter_mut()) {
        *d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}

/// Reads little-endian IEEE half values (exact widening).
pub(crate) fn dequant_f16(src: &[u8], dst: &mut [f32]) {
    for (b, d) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *d = f16_bits_to_f32(u16::from_le_bytes([b[0], b[1]]));
    }
}

/// Reads little-endian bfloat16 values: the top 16 bits of an f32.
pub(crate) fn dequant_bf16(src: &[u8], dst: &mut [f32]) {
    for (b, d) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *d = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
    }
}

pub(crate) fn quant_f32(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.iter().zip(dst.chunks_exact_mut(4)) {
        b.copy_from_slice(&x.to_le_bytes());
    }
}

/// Round-to-nearest-even conversion to half.
pub(crate) fn quant_f16(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.iter().zip(dst.chunks_exact_mut(2)) {
        b.copy_from_slice(&f16::from_f32(*x).to_bits().to_le_bytes());
    }
}

/// Round-to-nearest-even conversion to bfloat16 (NaN stays NaN).
pub(crate) fn quant_bf16(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.iter().zip(dst.chunks_exact_mut(2)) {
        b.copy_from_slice(&bf16::from_f32(*x).to_bits().to_le_bytes());
    }
}

/// Reads the f16 stored at `b[i..i + 2]` as f32. Block scales in most formats are stored this way.
#[inline(always)]
pub(crate) fn f16_at(b: &[u8], i: usize) -> f32 {
    f16_bits_to_f32(u16::from_le_bytes([b[i], b[i + 1]]))
}

/// Exact f16 -> f32 widening with plain integer and float operations, inlined everywhere
/// (the `half` crate checks for F16C at run time on every call, which dominated the
/// scalar kernels). Placing the 15 low bits 13 places up gives an f32 whose value is the
/// f16's times 2^-112, for normal and subnormal values alike, so one exact multiply fixes it.
/// Infinities and NaNs keep their payload (as numpy does).
#[inline(always)]
pub(crate) fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let rest = (h & 0x7fff) as u32;
    let magnitude = if rest >= 0x7c00 {
        f32::from_bits(0x7f80_0000 | ((rest & 0x3ff) << 13))
    } else {
        f32::from_bits(rest << 13) * f32::from_bits(0x7780_0000) // 2^112
    };
    f32::from_bits(magnitude.to_bits() | sign)
}

/// The f16 nearest to `x`, as little-endian bytes.
#[inline(always)]
pub(crate) fn f16_bytes(x: f32) -> [u8; 2] {
    f16::from_f32(x).to_bits().to_le_bytes()
}

/// `v` rounded to the nearest integer, halves away from zero (like `f32::round`), for
/// |v| < 2^31. Written with a truncating conversion because `f32::round` is a library call on
/// baseline x86_64 and wasm, which made activation quantization several times slower.
#[inline(always)]
pub(crate) fn round_half_away(v: f32) -> i32 {
    let t = v as i32;
    // Exact: v and t agree in sign and |v - t| < 1.
    let frac = v - t as f32;
    if frac >= 0.5 {
        t + 1
    } else if frac <= -0.5 {
        t - 1
    } else {
        t
    }
}
