//! K-quant super-blocks of 256 elements: layouts and dequantization.
//!
//! Layouts (little-endian; `d`, `dmin` are f16 unless noted):
//! - Q2_K (84 B): scales[16] (low nibble: scale, high nibble: min, per 16 elements),
//!   qs[64] (2 bits each), d, dmin. Element `h*128 + s*32 + l` is bits `2s..2s+2` of
//!   `qs[h*32 + l]`; value = d*scale*q - dmin*min.
//! - Q3_K (110 B): hmask[32], qs[64], scales[12] (16 six-bit scales, offset 32), d. Low two
//!   bits as in Q2_K; the third bit of element `b*32 + l` is bit b of hmask[l], and a *clear*
//!   bit subtracts 4; value = d*scale*q.
//! - Q4_K (144 B): d, dmin, scales[12] (8 six-bit scales and 8 six-bit mins), qs[128].
//!   Element `c*64 + n*32 + l` is nibble n of `qs[c*32 + l]`; value = d*sc*q - dmin*m.
//! - Q5_K (176 B): d, dmin, scales[12], qh[32], qs[128]; fifth bit of element `b*32 + l` is
//!   bit b of qh[l].
//! - Q6_K (210 B): ql[128], qh[64], scales[16] (i8), d. Element `h*128 + n*64 + k` (k < 64)
//!   takes nibble n of `ql[h*64 + k]`; element `h*128 + s*32 + l` takes bits `2s..2s+2` of
//!   `qh[h*32 + l]` as its top two bits; value = d*scale*(q - 32).
//! - Q8_K (292 B): d (f32), qs[256] (i8), bsums[16] (i16 sums of each 16 quants);
//!   value = d*q. Only used for activations.
//!
//! Products are evaluated in the same order as GGML's reference code (scale first, then
//! times the quant) so results are bit-identical to it.

use super::float::f16_at;

pub(crate) const QK_K: usize = 256;

/// Unpacks the 8 six-bit (scale, min) pairs of Q4_K and Q5_K.
#[inline(always)]
pub(crate) fn scale_min_k4(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (s[j + 8] & 0x0F) | ((s[j] >> 6) << 4);
        mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
    }
    (sc, mn)
}

/// Unpacks the 16 six-bit signed scales of Q3_K.
#[inline(always)]
pub(crate) fn scales_q3_k(s: &[u8]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        let low = if i < 8 { s[i] & 0x0F } else { s[i - 8] >> 4 };
        let high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        *o = ((low | (high << 4)) as i8) - 32;
    }
    out
}

pub(crate) fn dequant_q2_k(b: &[u8], y: &mut [f32]) {
    let scales = &b[0..16];
    let qs = &b[16..80];
    let d = f16_at(b, 80);
    let dmin = f16_at(b, 82);
    for h in 0..2 {
        for s in 0..4 {
            for l in 0..32 {
                let e = h * 128 + s * 32 + l;
                let sc = scales[e / 16];
                let dl = d * (sc & 0x0F) as f32;
                let ml = dmin * (sc >> 4) as f32;
                let q = (qs[h * 32 + l] >> (2 * s)) & 3;
                y[e] = dl * q as f32 - ml;
            }
        }
    }
}

pub(crate) fn dequant_q3_k(b: &[u8], y: &mut [f32]) {
    let hmask = &b[0..32];
    let qs = &b[32..96];
    let scales = scales_q3_k(&b[96..108]);
    let d = f16_at(b, 108);
    for h in 0..2 {
        for s in 0..4 {
            for l in 0..32 {
                let e = h * 128 + s * 32 + l;
                let dl = d * scales[e / 16] as f32;
                let low = ((qs[h * 32 + l] >> (2 * s)) & 3) as i32;
                let bit = (hmask[l] >> (e / 32)) & 1;
                let q = low - if bit == 0 { 4 } else { 0 };
                y[e] = dl * q as f32;
            }
        }
    }
}

pub(crate) fn dequant_q4_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let (sc, mn) = scale_min_k4(&b[4..16]);
    let qs = &b[16..144];
    for c in 0..4 {
        for n in 0..2 {
            let sub = c * 2 + n;
            let dl = d * sc[sub] as f32;
            let ml = dmin * mn[sub] as f32;
            for l in 0..32 {
                let q = (qs[c * 32 + l] >> (4 * n)) & 0x0F;
                y[sub * 32 + l] = dl * q as f32 - ml;
            }
        }
    }
}

pub(crate) fn dequant_q5_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let (sc, mn) = scale_min_k4(&b[4..16]);
    let qh = &b[16..48];
    let qs = &b[48..176];
    for c in 0..4 {
        for n in 0..2 {
            let sub = c * 2 + n;
            let dl = d * sc[sub] as f32;
            let ml = dmin * mn[sub] as f32;
            for l in 0..32 {
                let low = (qs[c * 32 + l] >> (4 * n)) & 0x0F;
                let high = (qh[l] >> sub) & 1;
                y[sub * 32 + l] = dl * (low | (high << 4)) as f32 - ml;
            }
        }
    }
}

pub(crate) fn dequant_q6_k(b: &[u8], y: &mut [f32]) {
    let ql = &b[0..128];
    let qh = &b[128..192];
    let scales = &b[192..208];
    let d = f16_at(b, 208);
    for h in 0..2 {
        for l in 0..32 {
            for s in 0..4 {
                // Element h*128 + s*32 + l: nibble (s / 2) of ql[h*64 + (s % 2)*32 + l].
                let e = h * 128 + s * 32 + l;
                let low = (ql[h * 64 + (s % 2) * 32 + l] >> (4 * (s / 2))) & 0x0F;
                let high = (qh[h * 32 + l] >> (2 * s)) & 3;
                let q = (low | (high << 4)) as i32 - 32;
                let dl = d * scales[e / 16] as i8 as f32;
                y[e] = dl * q as f32;
            }
        }
    }
}

pub(crate) fn dequant_q8_k(b: &[u8], y: &mut [f32]) {
    let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for j in 0..QK_K {
        y[j] = d * b[4 + j] as i8 as f32;
    }
}
