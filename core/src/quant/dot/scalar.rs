//! Portable dot products of one quantized weight row with an activation row already in the
//! weight type's vec-dot type. Each block's integer products are summed exactly in i32, then
//! scaled once per block, as GGML does.

use super::super::float::f16_at;
use super::super::iq4::{iq4_xs_scales, IQ4_LEVELS};
use super::super::kquant::{scale_min_k4, scales_q3_k};

/// Scale of a Q8_0 / Q8_1 activation block.
#[inline(always)]
fn act_d(a: &[u8]) -> f32 {
    f16_at(a, 0)
}

/// Signed i8 quants of an activation block starting at `at`.
#[inline(always)]
fn i8s(a: &[u8], at: usize, n: usize) -> &[i8] {
    bytemuck::cast_slice(&a[at..at + n])
}

/// Sum over 32 elements of `(lo/hi nibble of w[j] + offset) * a`, with nibbles ordered as in
/// Q4_0 (low nibbles are elements 0..16).
#[inline(always)]
fn nibble_dot(qs: &[u8], a: &[i8], offset: i32) -> i32 {
    let mut s = 0i32;
    for j in 0..16 {
        s += ((qs[j] & 0x0F) as i32 + offset) * a[j] as i32;
        s += ((qs[j] >> 4) as i32 + offset) * a[j + 16] as i32;
    }
    s
}

pub(crate) fn q4_0_q8_0(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(18).zip(a.chunks_exact(34)).take(nb) {
        let s = nibble_dot(&bw[2..18], i8s(ba, 2, 32), -8);
        sum += f16_at(bw, 0) * act_d(ba) * s as f32;
    }
    sum
}

pub(crate) fn q4_1_q8_1(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(20).zip(a.chunks_exact(36)).take(nb) {
        let s = nibble_dot(&bw[4..20], i8s(ba, 4, 32), 0);
        // The min term: m * sum(a) = m * s_a, with s_a = d_a * sum(q_a) stored in the block.
        sum += f16_at(bw, 0) * act_d(ba) * s as f32 + f16_at(bw, 2) * f16_at(ba, 2);
    }
    sum
}

/// Sum over 32 elements of `(five-bit q + offset) * a` for a Q5 block's qh word and nibbles.
#[inline(always)]
fn q5_dot(qh: u32, qs: &[u8], a: &[i8], offset: i32) -> i32 {
    let mut s = 0i32;
    for j in 0..16 {
        let lo = (qs[j] & 0x0F) as i32 | ((((qh >> j) & 1) as i32) << 4);
        let hi = (qs[j] >> 4) as i32 | ((((qh >> (j + 16)) & 1) as i32) << 4);
        s += (lo + offset) * a[j] as i32 + (hi + offset) * a[j + 16] as i32;
    }
    s
}

#[inline(always)]
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

pub(crate) fn q5_0_q8_0(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(22).zip(a.chunks_exact(34)).take(nb) {
        let s = q5_dot(u32_at(bw, 2), &bw[6..22], i8s(ba, 2, 32), -16);
        sum += f16_at(bw, 0) * act_d(ba) * s as f32;
    }
    sum
}

pub(crate) fn q5_1_q8_1(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(24).zip(a.chunks_exact(36)).take(nb) {
        let s = q5_dot(u32_at(bw, 4), &bw[8..24], i8s(ba, 4, 32), 0);
        sum += f16_at(bw, 0) * act_d(ba) * s as f32 + f16_at(bw, 2) * f16_at(ba, 2);
    }
    sum
}

pub(crate) fn q8_0_q8_0(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(34).zip(a.chunks_exact(34)).take(nb) {
        let (x, y) = (i8s(bw, 2, 32), i8s(ba, 2, 32));
        let s: i32 = x.iter().zip(y).map(|(p, q)| *p as i32 * *q as i32).sum();
        sum += f16_at(bw, 0) * act_d(ba) * s as f32;
    }
    sum
}

pub(crate) fn iq4_nl_q8_0(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(18).zip(a.chunks_exact(34)).take(nb) {
        let y = i8s(ba, 2, 32);
        let mut s = 0i32;
        for j in 0..16 {
            s += IQ4_LEVELS[(bw[2 + j] & 0x0F) as usize] as i32 * y[j] as i32;
            s += IQ4_LEVELS[(bw[2 + j] >> 4) as usize] as i32 * y[j + 16] as i32;
        }
        sum += f16_at(bw, 0) * act_d(ba) * s as f32;
    }
    sum
}

/// Pieces of a Q8_K activation block: scale, quants, sums of each 16 quants.
#[inline(always)]
fn q8k(a: &[u8]) -> (f32, &[i8], [i32; 16]) {
    let d = f32::from_le_bytes([a[0], a[1], a[2], a[3]]);
    let mut bsums = [0i32; 16];
    for (g, b) in bsums.iter_mut().enumerate() {
        *b = i16::from_le_bytes([a[260 + 2 * g], a[261 + 2 * g]]) as i32;
    }
    (d, i8s(a, 4, 256), bsums)
}

pub(crate) fn q2_k_q8_k(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(84).zip(a.chunks_exact(292)).take(nb) {
        let (da, y, bsums) = q8k(ba);
        let (scales, qs) = (&bw[0..16], &bw[16..80]);
        let mut sumi = 0i32;
        let mut summ = 0i32;
        for g in 0..16 {
            summ += (scales[g] >> 4) as i32 * bsums[g];
        }
        for e in 0..256 {
            let (h, s, l) = (e / 128, (e % 128) / 32, e % 32);
            let q = ((qs[h * 32 + l] >> (2 * s)) & 3) as i32;
            sumi += (scales[e / 16] & 0x0F) as i32 * q * y[e] as i32;
        }
        sum += da * f16_at(bw, 80) * sumi as f32 - da * f16_at(bw, 82) * summ as f32;
    }
    sum
}

pub(crate) fn q3_k_q8_k(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(110).zip(a.chunks_exact(292)).take(nb) {
        let (da, y, _) = q8k(ba);
        let (hmask, qs) = (&bw[0..32], &bw[32..96]);
        let scales = scales_q3_k(&bw[96..108]);
        let mut sumi = 0i32;
        for e in 0..256 {
            let (h, s, l) = (e / 128, (e % 128) / 32, e % 32);
            let low = ((qs[h * 32 + l] >> (2 * s)) & 3) as i32;
            let q = low
                - if (hmask[l] >> (e / 32)) & 1 == 0 {
                    4
                } else {
                    0
                };
            sumi += scales[e / 16] as i32 * q * y[e] as i32;
        }
        sum += da * f16_at(bw, 108) * sumi as f32;
    }
    sum
}

/// Shared by Q4_K and Q5_K: `high` gives the fifth bit (0 or 16) of element e, or 0 for Q4_K.
#[inline(always)]
fn q45_k(bw: &[u8], qs: &[u8], ba: &[u8], high: impl Fn(usize) -> i32) -> f32 {
    let (da, y, bsums) = q8k(ba);
    let (sc, mn) = scale_min_k4(&bw[4..16]);
    let mut sumi = 0i32;
    let mut summ = 0i32;
    for j in 0..8 {
        let mut s = 0i32;
        for l in 0..32 {
            let q = ((qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0x0F) as i32 | high(j * 32 + l);
            s += q * y[j * 32 + l] as i32;
        }
        sumi += sc[j] as i32 * s;
        summ += mn[j] as i32 * (bsums[2 * j] + bsums[2 * j + 1]);
    }
    da * f16_at(bw, 0) * sumi as f32 - da * f16_at(bw, 2) * summ as f32
}

pub(crate) fn q4_k_q8_k(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(144).zip(a.chunks_exact(292)).take(nb) {
        sum += q45_k(bw, &bw[16..144], ba, |_| 0);
    }
    sum
}

pub(crate) fn q5_k_q8_k(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(176).zip(a.chunks_exact(292)).take(nb) {
        let qh = &bw[16..48];
        sum += q45_k(bw, &bw[48..176], ba, |e| {
            (((qh[e % 32] >> (e / 32)) & 1) as i32) << 4
        });
    }
    sum
}

pub(crate) fn q6_k_q8_k(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(210).zip(a.chunks_exact(292)).take(nb) {
        let (da, y, bsums) = q8k(ba);
        let (ql, qh, scales) = (&bw[0..128], &bw[128..192], &bw[192..208]);
        let mut sumi = 0i32;
        for g in 0..16 {
            // sum((q - 32) * a) = sum(q * a) - 32 * bsum: keeps q unsigned in the inner loop.
            let mut s = -32 * bsums[g];
            for (e, a) in y.iter().enumerate().skip(g * 16).take(16) {
                let (h, sh, l) = (e / 128, (e % 128) / 32, e % 32);
                let low = (ql[h * 64 + (sh % 2) * 32 + l] >> (4 * (sh / 2))) & 0x0F;
                let high = (qh[h * 32 + l] >> (2 * sh)) & 3;
                s += (low | (high << 4)) as i32 * *a as i32;
            }
            sumi += scales[g] as i8 as i32 * s;
        }
        sum += da * f16_at(bw, 208) * sumi as f32;
    }
    sum
}

pub(crate) fn iq4_xs_q8_k(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(136).zip(a.chunks_exact(292)).take(nb) {
        let (da, y, _) = q8k(ba);
        let scales = iq4_xs_scales(bw);
        let qs = &bw[8..136];
        let mut sumi = 0i32;
        for ib in 0..8 {
            let mut s = 0i32;
            for k in 0..16 {
                let v = qs[ib * 16 + k];
                s += IQ4_LEVELS[(v & 0x0F) as usize] as i32 * y[ib * 32 + k] as i32;
                s += IQ4_LEVELS[(v >> 4) as usize] as i32 * y[ib * 32 + 16 + k] as i32;
            }
            sumi += scales[ib] * s;
        }
        sum += da * f16_at(bw, 0) * sumi as f32;
    }
    sum
}

/// Reads the `i`-th little-endian f32 of `b`.
#[inline(always)]
fn f32_at(b: &[u8], i: usize) -> f32 {
    f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

pub(crate) fn f32_f32(w: &[u8], a: &[u8], n: usize) -> f32 {
    (0..n).map(|i| f32_at(w, i) * f32_at(a, i)).sum()
}

pub(crate) fn f16_f32(w: &[u8], a: &[u8], n: usize) -> f32 {
    (0..n).map(|i| f16_at(w, 2 * i) * f32_at(a, i)).sum()
}

pub(crate) fn bf16_f32(w: &[u8], a: &[u8], n: usize) -> f32 {
    (0..n)
        .map(|i| {
            let bits = u16::from_le_bytes([w[2 * i], w[2 * i + 1]]) as u32;
            f32::from_bits(bits << 16) * f32_at(a, i)
        })
        .sum()
}
