//! The "legacy" 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
//!
//! Layouts (little-endian, `d`/`m`/`s` are f16):
//! - Q4_0 (18 B): d, qs[16]. Element j < 16 is the low nibble of qs[j], j >= 16 the high
//!   nibble of qs[j - 16]; value = d * (q - 8).
//! - Q4_1 (20 B): d, m, qs[16]; value = d * q + m.
//! - Q5_0 (22 B): d, qh (u32), qs[16]; bit j of qh is the fifth bit of element j;
//!   value = d * (q - 16).
//! - Q5_1 (24 B): d, m, qh, qs[16]; value = d * q + m.
//! - Q8_0 (34 B): d, qs[32] as i8; value = d * q.
//! - Q8_1 (36 B): d, s = d * sum(q), qs[32] as i8; value = d * q. Only used for activations.
//!
//! Quantizers follow the reference rounding of GGML (and so of the `gguf` Python package)
//! exactly, so a tensor quantized here is byte-identical to one quantized there.

use super::float::{f16_at, f16_bytes, round_half_away};

pub(crate) const QK: usize = 32;

#[inline(always)]
fn nibbles(qs: &[u8], j: usize) -> (u8, u8) {
    (qs[j] & 0x0F, qs[j] >> 4)
}

pub(crate) fn dequant_q4_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        let (lo, hi) = nibbles(qs, j);
        y[j] = d * (lo as i32 - 8) as f32;
        y[j + 16] = d * (hi as i32 - 8) as f32;
    }
}

pub(crate) fn dequant_q4_1(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    let qs = &b[4..20];
    for j in 0..16 {
        let (lo, hi) = nibbles(qs, j);
        y[j] = d * lo as f32 + m;
        y[j + 16] = d * hi as f32 + m;
    }
}

/// The 5-bit values of a Q5 block, from its high-bit word and low nibbles.
#[inline(always)]
fn q5_values(qh: u32, qs: &[u8]) -> [u8; 32] {
    let mut q = [0u8; 32];
    for j in 0..16 {
        let (lo, hi) = nibbles(qs, j);
        q[j] = lo | ((((qh >> j) & 1) as u8) << 4);
        q[j + 16] = hi | ((((qh >> (j + 16)) & 1) as u8) << 4);
    }
    q
}

#[inline(always)]
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

pub(crate) fn dequant_q5_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let q = q5_values(u32_at(b, 2), &b[6..22]);
    for j in 0..QK {
        y[j] = d * (q[j] as i32 - 16) as f32;
    }
}

pub(crate) fn dequant_q5_1(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    let q = q5_values(u32_at(b, 4), &b[8..24]);
    for j in 0..QK {
        y[j] = d * q[j] as f32 + m;
    }
}

pub(crate) fn dequant_q8_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..QK {
        y[j] = b[2 + j] as i8 as f32 * d;
    }
}

pub(crate) fn dequant_q8_1(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..QK {
        y[j] = b[4 + j] as i8 as f32 * d;
    }
}

/// The element with the largest magnitude, keeping its sign (first one on ties).
#[inline(always)]
fn signed_absmax(x: &[f32]) -> f32 {
    let mut best = 0.0f32;
    let mut best_abs = 0.0f32;
    for &v in x {
        if v.abs() > best_abs {
            best_abs = v.abs();
            best = v;
        }
    }
    best
}

#[inline(always)]
fn min_max(x: &[f32]) -> (f32, f32) {
    let mut lo = f32::INFINITY;
    let mut hi = f32::NEG_INFINITY;
    for &v in x {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    (lo, hi)
}

#[inline(always)]
fn inverse(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

/// Truncating conversion clamped to `0..=max`, as the reference quantizers round (`+0.5`
/// before truncation).
#[inline(always)]
fn trunc_clamp(v: f32, max: u8) -> u8 {
    (v as i32).clamp(0, max as i32) as u8
}

fn pack_nibbles(q: &[u8; 32], qs: &mut [u8]) {
    for j in 0..16 {
        qs[j] = (q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4);
    }
}

fn pack_high_bits(q: &[u8; 32]) -> [u8; 4] {
    let mut qh = 0u32;
    for (j, v) in q.iter().enumerate() {
        qh |= ((*v as u32 >> 4) & 1) << j;
    }
    qh.to_le_bytes()
}

pub(crate) fn quant_q4_0(x: &[f32], b: &mut [u8]) {
    let d = signed_absmax(x) / -8.0;
    let id = inverse(d);
    let mut q = [0u8; 32];
    for j in 0..QK {
        q[j] = trunc_clamp(x[j] * id + 8.5, 15);
    }
    b[0..2].copy_from_slice(&f16_bytes(d));
    pack_nibbles(&q, &mut b[2..18]);
}

pub(crate) fn quant_q4_1(x: &[f32], b: &mut [u8]) {
    let (min, max) = min_max(x);
    let d = (max - min) / 15.0;
    let id = inverse(d);
    let mut q = [0u8; 32];
    for j in 0..QK {
        q[j] = trunc_clamp((x[j] - min) * id + 0.5, 15);
    }
    b[0..2].copy_from_slice(&f16_bytes(d));
    b[2..4].copy_from_slice(&f16_bytes(min));
    pack_nibbles(&q, &mut b[4..20]);
}

pub(crate) fn quant_q5_0(x: &[f32], b: &mut [u8]) {
    let d = signed_absmax(x) / -16.0;
    let id = inverse(d);
    let mut q = [0u8; 32];
    for j in 0..QK {
        q[j] = trunc_clamp(x[j] * id + 16.5, 31);
    }
    b[0..2].copy_from_slice(&f16_bytes(d));
    b[2..6].copy_from_slice(&pack_high_bits(&q));
    pack_nibbles(&q, &mut b[6..22]);
}

pub(crate) fn quant_q5_1(x: &[f32], b: &mut [u8]) {
    let (min, max) = min_max(x);
    let d = (max - min) / 31.0;
    let id = inverse(d);
    let mut q = [0u8; 32];
    for j in 0..QK {
        q[j] = trunc_clamp((x[j] - min) * id + 0.5, 31);
    }
    b[0..2].copy_from_slice(&f16_bytes(d));
    b[2..4].copy_from_slice(&f16_bytes(min));
    b[4..8].copy_from_slice(&pack_high_bits(&q));
    pack_nibbles(&q, &mut b[8..24]);
}

/// Quantizes 32 values to i8 with scale amax / 127 (round half away from zero); returns the
/// unrounded scale and the sum of the quants.
#[inline(always)]
fn quant_i8_block(x: &[f32], qs: &mut [u8]) -> (f32, i32) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = inverse(d);
    let mut sum = 0i32;
    for j in 0..QK {
        let q = round_half_away(x[j] * id) as i8;
        sum += q as i32;
        qs[j] = q as u8;
    }
    (d, sum)
}

pub(crate) fn quant_q8_0(x: &[f32], b: &mut [u8]) {
    let (d, _) = quant_i8_block(x, &mut b[2..34]);
    b[0..2].copy_from_slice(&f16_bytes(d));
}

pub(crate) fn quant_q8_1(x: &[f32], b: &mut [u8]) {
    let (d, sum) = quant_i8_block(x, &mut b[4..36]);
    b[0..2].copy_from_slice(&f16_bytes(d));
    b[2..4].copy_from_slice(&f16_bytes(d * sum as f32));
}
