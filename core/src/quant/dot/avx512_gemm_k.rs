//! GEMM micro-kernel for Q4_K and Q6_K weights against Q8_K activations with AVX-512 VNNI,
//! bit-identical to the one-row kernels of `avx2_kquant.rs`.
//!
//! The one-row kernels reduce each 256-element super-block to exact integers and then do
//! `sum += da * dw * sumi - da * dmin * summ` (Q4_K) or `sum += da * dw * sumi` (Q6_K, where
//! `sumi` already has the `-32` offset taken out) in f32, block after block. Here the exact
//! integers come from a different but exact route, and the float steps run 16 tokens per
//! zmm, in the same order per lane.
//!
//! Layout: weights are split in 16-element groups (the Q6_K scale granularity; a Q4_K
//! sub-block is two groups with the same scale). One activation line holds group g of 4
//! tokens (16 bytes each, stored as `a + 128`), and the weight group is broadcast to the 4
//! lanes: `vpmaddubsw` + `vpdpwssd` with the group's scale (broadcast) accumulate
//! `scale * sum((a + 128) w)` per (row, 4 tokens). A micro-tile is 4 rows x 16 tokens (16
//! accumulators); after each super-block they are reduced exactly with a transposing add
//! tree into one vector per row, lane `l` holding token `SIGMA(l)`; the weight panel's
//! `C = 128 * sum(scale * w)` removes the `+128`. For Q4_K the min term
//! `summ = sum_j min_j * (sum of sub-block j's activations)` is 4 `vpdpwssd` of the
//! activation panel's paired sub-block sums with the row's paired mins.
//!
//! Super-blocks are taken in chunks of [`KC`] so that a chunk of the weight tile and of a
//! token group's activations stay in L1 cache; the float sums wait in scratch between chunks
//! (same order of float operations per (row, token)).

use std::arch::x86_64::*;

use super::avx2_util::*;
use super::gemm::{zeroed, GemmActs, Line};
use crate::dtype::GgmlType;

/// Rows and tokens per micro-tile; tokens come in quads (one 16-byte lane each).
const R: usize = 4;
const T: usize = 16;
/// Super-blocks per chunk.
const KC: usize = 2;
/// Lines per row and super-block in the weight panel: 256 weights, 16 scales, a misc line.
const W_REC: usize = 6;

/// Token of lane `l` of a reduced vector (the add tree transposes 4 x 4).
const fn sigma(l: usize) -> usize {
    4 * (l % 4) + l / 4
}

fn has_mins(w: GgmlType) -> bool {
    w == GgmlType::Q4_K
}

/// Lines per (token group, super-block) of the activation panel: 4 quads x 16 groups, da,
/// then (Q4_K) 4 lines of paired sub-block sums.
fn a_rec(w: GgmlType) -> usize {
    T / 4 * 16 + 1 + if has_mins(w) { 4 } else { 0 }
}

/// Lines of the activation panel for `n_tok` rows of `n` elements.
pub(super) fn act_lines(w: GgmlType, n: usize, n_tok: usize) -> usize {
    n_tok.div_ceil(T) * (n / 256) * a_rec(w)
}

/// Lays out `n_tok` Q8_K activation rows into `lines` (zeroed, [`act_lines`] long).
pub(super) fn fill_acts(w: GgmlType, acts: &[u8], n: usize, n_tok: usize, lines: &mut [Line]) {
    let nb = n / 256;
    let rec = a_rec(w);
    let mut lane_of = [0usize; T];
    for l in 0..T {
        lane_of[sigma(l)] = l;
    }
    for (t, row) in acts.chunks_exact(nb * 292).take(n_tok).enumerate() {
        let (g, k) = (t / T, t % T);
        let (quad, lane) = (k / 4, k % 4);
        let l = lane_of[k];
        for (b, blk) in row.chunks_exact(292).enumerate() {
            let base = (g * nb + b) * rec;
            for grp in 0..16 {
                let dst = &mut lines[base + quad * 16 + grp].0[16 * lane..16 * lane + 16];
                for (d, s) in dst.iter_mut().zip(&blk[4 + 16 * grp..4 + 16 * grp + 16]) {
                    *d = s ^ 0x80;
                }
            }
            lines[base + 64].0[4 * l..4 * l + 4].copy_from_slice(&blk[0..4]);
            if has_mins(w) {
                let bsum = |i: usize| i16::from_le_bytes([blk[260 + 2 * i], blk[261 + 2 * i]]);
                for kk in 0..4 {
                    // Sub-block sums fit i16 (32 * 128); pair 2kk and 2kk + 1.
                    let p0 = bsum(4 * kk) + bsum(4 * kk + 1);
                    let p1 = bsum(4 * kk + 2) + bsum(4 * kk + 3);
                    let v = (p0 as u16 as u32) | ((p1 as u16 as u32) << 16);
                    lines[base + 65 + kk].0[4 * l..4 * l + 4].copy_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
}

/// An i16 scale twice in an i32 (the `vpdpwssd` multiplier of a pair of i16 sums).
fn pair16(lo: i16, hi: i16) -> u32 {
    (lo as u16 as u32) | ((hi as u16 as u32) << 16)
}

/// Unpacks one Q4_K super-block into its record (6 lines at `rec`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn fill_q4_k(bw: *const u8, rec: *mut Line) {
    let low = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi8(1);
    let (sc, mn) = scale_min_words(bw.add(4));
    let scale = |j: usize| ((sc >> (8 * j)) & 0xff) as i16;
    let min = |j: usize| ((mn >> (8 * j)) & 0xff) as i16;
    let q = rec as *mut u8;
    let mut c = _mm256_setzero_si256();
    for cc in 0..4 {
        let raw = _mm256_loadu_si256(bw.add(16 + 32 * cc) as *const __m256i);
        let lo = _mm256_and_si256(raw, low);
        let hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
        _mm256_storeu_si256(q.add(64 * cc) as *mut __m256i, lo);
        _mm256_storeu_si256(q.add(64 * cc + 32) as *mut __m256i, hi);
        let s0 = _mm256_set1_epi16(scale(2 * cc));
        let s1 = _mm256_set1_epi16(scale(2 * cc + 1));
        c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(ones, lo), s0));
        c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(ones, hi), s1));
    }
    let scales = (*rec.add(4)).0.as_mut_ptr() as *mut u32;
    for g in 0..16 {
        scales
            .add(g)
            .write_unaligned(pair16(scale(g / 2), scale(g / 2)));
    }
    let misc = (*rec.add(5)).0.as_mut_ptr();
    (misc as *mut f32).write_unaligned(f16_at(bw));
    (misc.add(4) as *mut f32).write_unaligned(f16_at(bw.add(2)));
    (misc.add(8) as *mut i32).write_unaligned(hsum_epi32(c) << 7);
    for k in 0..4 {
        (misc.add(12 + 4 * k) as *mut u32).write_unaligned(pair16(min(2 * k), min(2 * k + 1)));
    }
}

/// Unpacks one Q6_K super-block into its record: weights as `q - 32`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn fill_q6_k(bw: *const u8, rec: *mut Line) {
    let ones = _mm256_set1_epi8(1);
    let scale = |g: usize| *bw.add(192 + g) as i8 as i16;
    let q = rec as *mut u8;
    let mut c = _mm256_setzero_si256();
    for h in 0..2 {
        for (s, u) in q6_k_half(bw, h).into_iter().enumerate() {
            let v = _mm256_sub_epi8(u, _mm256_set1_epi8(32));
            // Elements 128h + 32s .. + 32: groups 8h + 2s (low 16) and 8h + 2s + 1.
            _mm256_storeu_si256(q.add(128 * h + 32 * s) as *mut __m256i, v);
            let g = 8 * h + 2 * s;
            let sc = _mm256_set_m128i(_mm_set1_epi16(scale(g + 1)), _mm_set1_epi16(scale(g)));
            c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(ones, v), sc));
        }
    }
    let scales = (*rec.add(4)).0.as_mut_ptr() as *mut u32;
    for g in 0..16 {
        scales.add(g).write_unaligned(pair16(scale(g), scale(g)));
    }
    let misc = (*rec.add(5)).0.as_mut_ptr();
    (misc as *mut f32).write_unaligned(f16_at(bw.add(208)));
    (misc.add(8) as *mut i32).write_unaligned(hsum_epi32(c) << 7);
}

/// Unpacks `n_rows` weight rows into the panel (zeroed; record of row r, super-block b at
/// `((r / 4 * nb + b) * 4 + r % 4) * W_REC`).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn fill_weights(w: GgmlType, rows: &[u8], n_rows: usize, nb: usize, lines: &mut [Line]) {
    let size = w.type_size();
    let lp = lines.as_mut_ptr();
    for (r, row) in rows.chunks_exact(nb * size).take(n_rows).enumerate() {
        for b in 0..nb {
            let rec = lp.add(((r / R * nb + b) * R + r % R) * W_REC);
            let bw = row.as_ptr().add(b * size);
            if has_mins(w) {
                fill_q4_k(bw, rec);
            } else {
                fill_q6_k(bw, rec);
            }
        }
    }
}

/// Exact transposing reduction: `acc[r][q]` (lane group L: token 4q + L) to one vector per
/// row r whose lane 4L + q is the sum of `acc[r][q]`'s lane group L (token `SIGMA`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn reduce(acc: [[__m512i; 4]; R]) -> [__m512i; R] {
    acc.map(|[x0, x1, x2, x3]| {
        let b0 = _mm512_add_epi32(_mm512_unpacklo_epi32(x0, x1), _mm512_unpackhi_epi32(x0, x1));
        let b1 = _mm512_add_epi32(_mm512_unpacklo_epi32(x2, x3), _mm512_unpackhi_epi32(x2, x3));
        _mm512_add_epi32(_mm512_unpacklo_epi64(b0, b1), _mm512_unpackhi_epi64(b0, b1))
    })
}

/// Super-blocks `b0..b1` of one micro-tile (4 rows from `w`, 16 tokens from `a`), added to
/// the float sums `sum` (one vector per row, lane order `SIGMA`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn micro<const MINS: bool>(
    w: *const Line,
    a: *const Line,
    blocks: std::ops::Range<usize>,
    ar: usize,
    sum: &mut [__m512; R],
) {
    for b in blocks {
        let wb = w.add(b * R * W_REC);
        let ab = a.add(b * ar);
        let mut acc = [[_mm512_setzero_si512(); 4]; R];
        for g in 0..16 {
            let av: [__m512i; 4] =
                std::array::from_fn(|q| _mm512_load_si512(ab.add(q * 16 + g) as *const _));
            for (r, acc) in acc.iter_mut().enumerate() {
                let wr = wb.add(r * W_REC) as *const u8;
                let wv = _mm512_broadcast_i32x4(_mm_loadu_si128(wr.add(16 * g) as *const __m128i));
                let sv = _mm512_set1_epi32((wr.add(256 + 4 * g) as *const i32).read());
                for (acc, av) in acc.iter_mut().zip(av) {
                    *acc = _mm512_dpwssd_epi32(*acc, _mm512_maddubs_epi16(av, wv), sv);
                }
            }
        }
        let red = reduce(acc);
        let da = _mm512_load_ps(ab.add(64) as *const f32);
        for (r, (red, sum)) in red.into_iter().zip(sum.iter_mut()).enumerate() {
            let misc = wb.add(r * W_REC + 5) as *const u8;
            let dw = _mm512_set1_ps((misc as *const f32).read());
            let sumi = _mm512_sub_epi32(red, _mm512_set1_epi32((misc.add(8) as *const i32).read()));
            let t1 = _mm512_mul_ps(_mm512_mul_ps(da, dw), _mm512_cvtepi32_ps(sumi));
            if MINS {
                let mut summ = _mm512_setzero_si512();
                for k in 0..4 {
                    let pk = _mm512_load_si512(ab.add(65 + k) as *const _);
                    let mk = _mm512_set1_epi32((misc.add(12 + 4 * k) as *const i32).read());
                    summ = _mm512_dpwssd_epi32(summ, pk, mk);
                }
                let dmin = _mm512_set1_ps((misc.add(4) as *const f32).read());
                let t2 = _mm512_mul_ps(_mm512_mul_ps(da, dmin), _mm512_cvtepi32_ps(summ));
                *sum = _mm512_add_ps(*sum, _mm512_sub_ps(t1, t2));
            } else {
                *sum = _mm512_add_ps(*sum, t1);
            }
        }
    }
}

/// `out[r * n_tok + t]` for `n_rows` rows of `w_rows` against all activation rows of `acts`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn tile(
    acts: &GemmActs,
    w_rows: &[u8],
    n_rows: usize,
    panel: &mut Vec<Line>,
    out: &mut [f32],
) {
    let w = acts.ty;
    let nb = acts.n / 256;
    let ar = a_rec(w);
    let n_tok = acts.n_tok;
    let row_groups = n_rows.div_ceil(R);
    let tok_groups = n_tok.div_ceil(T);
    // The weight panel, then one line of float sums per (token group, row).
    let sums_at = row_groups * nb * R * W_REC;
    zeroed(panel, sums_at + tok_groups * row_groups * R);
    fill_weights(w, w_rows, n_rows, nb, &mut panel[..sums_at]);
    let p = panel.as_mut_ptr();
    for k0 in (0..nb).step_by(KC) {
        let blocks = k0..(k0 + KC).min(nb);
        for g in 0..tok_groups {
            let a = acts.lines.as_ptr().add(g * nb * ar);
            for rg in 0..row_groups {
                let sums = p.add(sums_at + (g * row_groups + rg) * R) as *mut __m512;
                let mut sum: [__m512; R] =
                    std::array::from_fn(|r| _mm512_load_ps(sums.add(r) as *const f32));
                let wp = p.add(rg * nb * R * W_REC) as *const Line;
                if has_mins(w) {
                    micro::<true>(wp, a, blocks.clone(), ar, &mut sum);
                } else {
                    micro::<false>(wp, a, blocks.clone(), ar, &mut sum);
                }
                for (r, s) in sum.into_iter().enumerate() {
                    _mm512_store_ps(sums.add(r) as *mut f32, s);
                }
            }
        }
    }
    for g in 0..tok_groups {
        for rg in 0..row_groups {
            for r in 0..R.min(n_rows - rg * R) {
                let line = &panel[sums_at + (g * row_groups + rg) * R + r];
                for l in 0..T {
                    let t = g * T + sigma(l);
                    if t < n_tok {
                        let v = f32::from_le_bytes(line.0[4 * l..4 * l + 4].try_into().unwrap());
                        out[(rg * R + r) * n_tok + t] = v;
                    }
                }
            }
        }
    }
}
