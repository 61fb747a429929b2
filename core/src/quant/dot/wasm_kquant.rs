//! wasm simd128 kernels for K-quant weights against Q8_K activations. Each super-block's
//! integer sum is reduced exactly to one i32 and scaled with the portable kernel's float
//! expression, so results are bit-identical to `scalar.rs` (and so to the x86 AVX2 K-quant
//! kernels, which are too).

use core::arch::wasm32::*;

use super::super::float::f16_at;
use super::super::kquant::scale_min_k4;
use super::wasm_util::*;

/// The Q8_K block's f32 scale.
#[inline(always)]
fn act_d(ba: &[u8]) -> f32 {
    f32::from_le_bytes([ba[0], ba[1], ba[2], ba[3]])
}

/// Sum `g` of the Q8_K block's 16 sums of 16 quants.
#[inline(always)]
fn bsum(ba: &[u8], g: usize) -> i32 {
    i16::from_le_bytes([ba[260 + 2 * g], ba[261 + 2 * g]]) as i32
}

/// Shared by Q4_K and Q5_K: `quants(c)` gives the weights of sub-blocks 2c and 2c + 1 as
/// (low half, high half) byte vectors, each element at most 31 (so 4 products fit i16).
#[inline(always)]
unsafe fn q45_k(bw: &[u8], ba: &[u8], quants: impl Fn(usize) -> [[v128; 2]; 2]) -> f32 {
    let (sc, mn) = scale_min_k4(&bw[4..16]);
    let ya = ba.as_ptr().add(4);
    let mut acc = i32x4_splat(0);
    for c in 0..4 {
        let q = quants(c);
        for (k, [x0, x1]) in q.into_iter().enumerate() {
            let j = 2 * c + k;
            let y = ya.add(32 * j);
            let p = i32x4_extadd_pairwise_i16x8(dot_small_i16(x0, load(y), x1, load(y.add(16))));
            acc = i32x4_add(acc, i32x4_mul(p, i32x4_splat(sc[j] as i32)));
        }
    }
    let sumi = hsum_i32(acc);
    let mut summ = 0i32;
    for (j, m) in mn.iter().enumerate() {
        summ += *m as i32 * (bsum(ba, 2 * j) + bsum(ba, 2 * j + 1));
    }
    let da = act_d(ba);
    da * f16_at(bw, 0) * sumi as f32 - da * f16_at(bw, 2) * summ as f32
}

/// # Safety
/// simd128 only; `w` and `a` hold `nb` blocks (checked by `vec_dot`).
pub(super) unsafe fn q4_k_q8_k(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (bw, ba) in w.chunks_exact(144).zip(a.chunks_exact(292)).take(nb) {
        let qs = bw.as_ptr().add(16);
        sum += q45_k(bw, ba, |c| {
            let (l0, h0) = nibbles(qs.add(32 * c));
            let (l1, h1) = nibbles(qs.add(32 * c + 16));
            [[l0, l1], [h0, h1]]
        });
    }
    sum
}

/// # Safety
/// As [`q4_k_q8_k`].
pub(super) unsafe fn q5_k_q8_k(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    let fifth = u8x16_splat(0x10);
    for (bw, ba) in w.chunks_exact(176).zip(a.chunks_exact(292)).take(nb) {
        // Byte l of qh holds the fifth bit of element l of sub-block j in bit j.
        let qh = [load(bw.as_ptr().add(16)), load(bw.as_ptr().add(32))];
        let qs = bw.as_ptr().add(48);
        sum += q45_k(bw, ba, |c| {
            let high = |j: usize, half: usize| {
                let bit = u8x16_splat(1 << j);
                v128_and(i8x16_eq(v128_and(qh[half], bit), bit), fifth)
            };
            let (l0, h0) = nibbles(qs.add(32 * c));
            let (l1, h1) = nibbles(qs.add(32 * c + 16));
            [
                [v128_or(l0, high(2 * c, 0)), v128_or(l1, high(2 * c, 1))],
                [
                    v128_or(h0, high(2 * c + 1, 0)),
                    v128_or(h1, high(2 * c + 1, 1)),
                ],
            ]
        });
    }
    sum
}

/// # Safety
/// As [`q4_k_q8_k`].
pub(super) unsafe fn q6_k_q8_k(w: &[u8], a: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    let low = u8x16_splat(0x0F);
    let two = u8x16_splat(0x30);
    for (bw, ba) in w.chunks_exact(210).zip(a.chunks_exact(292)).take(nb) {
        let (pl, ph, ya) = (bw.as_ptr(), bw.as_ptr().add(128), ba.as_ptr().add(4));
        let scales = &bw[192..208];
        let mut acc = i32x4_splat(0);
        for h in 0..2 {
            // Element h*128 + s*32 + l (group h*8 + s*2 + l/16) takes its low four bits from
            // ql[h*64 + (s%2)*32 + l] (nibble s/2) and its top two from bits 2s of
            // qh[h*32 + l]; one vector holds one group (16 consecutive l).
            for k in 0..2 {
                let a0 = load(pl.add(64 * h + 16 * k));
                let a1 = load(pl.add(64 * h + 32 + 16 * k));
                let c = load(ph.add(32 * h + 16 * k));
                let q = [
                    v128_or(v128_and(a0, low), v128_and(i8x16_shl(c, 4), two)),
                    v128_or(v128_and(a1, low), v128_and(i8x16_shl(c, 2), two)),
                    v128_or(u8x16_shr(a0, 4), v128_and(c, two)),
                    v128_or(u8x16_shr(a1, 4), v128_and(u8x16_shr(c, 2), two)),
                ];
                for (s, x) in q.into_iter().enumerate() {
                    let g = h * 8 + s * 2 + k;
                    let y = load(ya.add(h * 128 + s * 32 + 16 * k));
                    // u6 * i8 products fit i16 in pairs (2 * 63 * 128).
                    let p16 =
                        i16x8_add(i16x8_extmul_low_i8x16(x, y), i16x8_extmul_high_i8x16(x, y));
                    let p = i32x4_extadd_pairwise_i16x8(p16);
                    acc = i32x4_add(acc, i32x4_mul(p, i32x4_splat(scales[g] as i8 as i32)));
                }
            }
        }
        // sum((q - 32) * a) = sum(q * a) - 32 * bsum, per 16-element group.
        let mut corr = 0i32;
        for (g, sc) in scales.iter().enumerate() {
            corr += *sc as i8 as i32 * bsum(ba, g);
        }
        let sumi = hsum_i32(acc) - 32 * corr;
        sum += act_d(ba) * f16_at(bw, 208) * sumi as f32;
    }
    sum
}
