//! GEMM micro-kernel for the 32-element block types (Q4_0, Q4_1, Q5_0, Q8_0, IQ4_NL) with
//! AVX-512 VNNI, bit-identical to the one-row AVX2 kernels of `avx2_legacy.rs`.
//!
//! The one-row kernel keeps, per block parity, 8 float lanes: lane j of block i gets
//! `fma(dw * da, float(sum of 4 products of elements 4j..4j+3), acc[i & 1][j])`, and the result
//! is `hsum(acc[0] + acc[1])` (plus, for Q4_1, `mins[0] + mins[1]` where the min terms
//! `fma(m_w, s_a, mins[i & 1])` are summed apart). Here one zmm holds blocks 2p (low half) and
//! 2p + 1 (high half) of one (row, token), so one zmm accumulator is exactly the pair of ymm
//! accumulators; a micro-tile is 4 rows x 4 tokens (16 accumulators).
//!
//! Integers: activations are stored as `a + 128` (u8) and weights as signed bytes, so
//! `vpdpbusd` gives `sum (a + 128) w`; its accumulator starts at the weight panel's
//! `-128 * sum w` (per 4-element lane), which leaves exactly the one-row kernel's lane sums.
//!
//! Panels (lines of 64 bytes), records per (group of 4, pair of blocks):
//! - activations: per token, its quants of the two blocks, then `[da ×8 | da' ×8]`; with a
//!   min term, two more lines of `s_a` (lane 4r + t = token t's, for each block of the pair);
//! - weights: per row, its quants, the corrections, `[dw ×8 | dw' ×8]`; with a min term,
//!   two more lines of `m_w` (lane 4r + t = row r's).
//!
//! A missing odd block is all zeros: it adds `+0` to the odd accumulators, which never hold
//! `-0` (they start at `+0`, and round-to-nearest sums give `-0` only from two `-0`s), so the
//! bits are those of the one-row kernel, which skips it.

use std::arch::x86_64::*;

use super::avx2_util::*;
use super::gemm::{zeroed, GemmActs, Line};
use crate::dtype::GgmlType;

/// Rows and tokens per micro-tile.
const R: usize = 4;
const T: usize = 4;

/// Whether the type has a min term (Q4_1: dotted with Q8_1, which stores d * sum(q)).
fn has_mins(w: GgmlType) -> bool {
    w == GgmlType::Q4_1
}

fn w_rec(w: GgmlType) -> usize {
    3 * R + if has_mins(w) { 2 } else { 0 }
}

fn a_rec(w: GgmlType) -> usize {
    2 * T + if has_mins(w) { 2 } else { 0 }
}

/// Lines of the activation panel for `n_tok` rows of `n` elements.
pub(super) fn act_lines(w: GgmlType, n: usize, n_tok: usize) -> usize {
    n_tok.div_ceil(T) * (n / 32).div_ceil(2) * a_rec(w)
}

fn put_f32(line: &mut Line, lane: usize, v: f32) {
    line.0[4 * lane..4 * lane + 4].copy_from_slice(&v.to_le_bytes());
}

/// Lays out the activation rows (`acts`: `n_tok` rows in Q8_0, or Q8_1 for Q4_1) into
/// `lines` (zeroed, [`act_lines`] long).
pub(super) fn fill_acts(w: GgmlType, acts: &[u8], n: usize, n_tok: usize, lines: &mut [Line]) {
    let mins = has_mins(w);
    let (size, qoff) = if mins { (36, 4) } else { (34, 2) };
    let nb = n / 32;
    let np = nb.div_ceil(2);
    let rec = a_rec(w);
    for (t, row) in acts.chunks_exact(nb * size).take(n_tok).enumerate() {
        let (g, k) = (t / T, t % T);
        for (i, b) in row.chunks_exact(size).enumerate() {
            let (p, h) = (i / 2, i % 2);
            let base = (g * np + p) * rec;
            let q = &mut lines[base + 2 * k].0[32 * h..32 * h + 32];
            for (d, s) in q.iter_mut().zip(&b[qoff..qoff + 32]) {
                *d = s ^ 0x80;
            }
            let da = super::super::float::f16_at(b, 0);
            for lane in 8 * h..8 * h + 8 {
                put_f32(&mut lines[base + 2 * k + 1], lane, da);
            }
            if mins {
                let sa = super::super::float::f16_at(b, 2);
                for r in 0..R {
                    put_f32(&mut lines[base + 2 * T + h], r * T + k, sa);
                }
            }
        }
    }
}

/// A block's 32 weights as signed bytes (element order, as the one-row kernels see them).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quants(w: GgmlType, b: *const u8) -> __m256i {
    use GgmlType::*;
    match w {
        Q8_0 => _mm256_loadu_si256(b.add(2) as *const __m256i),
        Q4_0 => _mm256_sub_epi8(nibbles_32(b.add(2)), _mm256_set1_epi8(8)),
        Q5_0 => {
            let clear = _mm256_andnot_si256(bits_to_bytes_32(b.add(2)), _mm256_set1_epi8(-16));
            _mm256_or_si256(nibbles_32(b.add(6)), clear)
        }
        IQ4_NL => _mm256_shuffle_epi8(iq4_table(), nibbles_32(b.add(2))),
        // Q4_1: unsigned nibbles, which are valid signed bytes too.
        _ => nibbles_32(b.add(4)),
    }
}

/// Unpacks `n_rows` weight rows into the panel `lines` (zeroed, padded to whole groups).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn fill_weights(w: GgmlType, rows: &[u8], n_rows: usize, nb: usize, lines: &mut [Line]) {
    let size = w.type_size();
    let np = nb.div_ceil(2);
    let rec = w_rec(w);
    let mins = has_mins(w);
    let ones = _mm256_set1_epi8(1);
    let lp = lines.as_mut_ptr();
    for (r, row) in rows.chunks_exact(nb * size).take(n_rows).enumerate() {
        let (g, k) = (r / R, r % R);
        for i in 0..nb {
            let (p, h) = (i / 2, i % 2);
            let base = (g * np + p) * rec;
            let b = row.as_ptr().add(i * size);
            let q = quants(w, b);
            // -128 * (sum of each 4 weights): the exact offset of the u8 activations.
            let corr = _mm256_sub_epi32(
                _mm256_setzero_si256(),
                _mm256_slli_epi32(dot_u8_i8(ones, q), 7),
            );
            // SAFETY (of the writes): the panel holds every (group, pair) record.
            let at = |l: usize| (lp.add(base + 3 * k + l) as *mut u8).add(32 * h) as *mut __m256i;
            _mm256_storeu_si256(at(0), q);
            _mm256_storeu_si256(at(1), corr);
            _mm256_storeu_ps(at(2) as *mut f32, f16x8_at(b));
            if mins {
                let mw = f16_at(b.add(2));
                for t in 0..T {
                    put_f32(&mut *lp.add(base + 3 * R + h), k * T + t, mw);
                }
            }
        }
    }
}

/// Sums of one micro-tile (lane 4r + t: row r, token t), as the one-row kernel gives them.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn micro<const MINS: bool>(
    w: *const Line,
    a: *const Line,
    np: usize,
    wr: usize,
    ar: usize,
) -> [f32; R * T] {
    let ld = |p: *const Line| _mm512_load_si512(p as *const _);
    let ldps = |p: *const Line| _mm512_load_ps(p as *const f32);
    let mut acc = [_mm512_setzero_ps(); R * T];
    let mut mins = [_mm512_setzero_ps(); 2];
    for p in 0..np {
        let wp = w.add(p * wr);
        let ap = a.add(p * ar);
        let av: [__m512i; T] = std::array::from_fn(|t| ld(ap.add(2 * t)));
        for r in 0..R {
            let q = ld(wp.add(3 * r));
            let dw = ldps(wp.add(3 * r + 2));
            for t in 0..T {
                let s = _mm512_dpbusd_epi32(ld(wp.add(3 * r + 1)), av[t], q);
                let d = _mm512_mul_ps(dw, ldps(ap.add(2 * t + 1)));
                acc[r * T + t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s), acc[r * T + t]);
            }
        }
        if MINS {
            for (h, m) in mins.iter_mut().enumerate() {
                *m = _mm512_fmadd_ps(ldps(wp.add(3 * R + h)), ldps(ap.add(2 * T + h)), *m);
            }
        }
    }
    let mut msum = [0f32; 16];
    if MINS {
        _mm512_storeu_ps(msum.as_mut_ptr(), _mm512_add_ps(mins[0], mins[1]));
    }
    let mut sums = [0f32; 16];
    _mm512_storeu_ps(sums.as_mut_ptr(), hsum16(acc));
    let mut out = [0f32; R * T];
    for (i, o) in out.iter_mut().enumerate() {
        *o = sums[4 * (i % 4) + i / 4];
        if MINS {
            // As the one-row kernel: the float sum, then the min terms added to it.
            *o += msum[i];
        }
    }
    out
}

/// The one-row kernel's final sum of each of 16 accumulators, `hsum_ps(lo + hi)` of its two
/// ymm halves, with the same pairwise additions but 16 at a time (a transposing add tree):
/// lane `4L + j` of the result is accumulator `4j + L`'s.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn hsum16(acc: [__m512; 16]) -> __m512 {
    // W_k = [V_2k | V_2k+1] with V = lo + hi (the ymm accumulators of even and odd blocks).
    let w: [__m512; 8] = std::array::from_fn(|k| {
        let (a, b) = (acc[2 * k], acc[2 * k + 1]);
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x44>(a, b),
            _mm512_shuffle_f32x4::<0xEE>(a, b),
        )
    });
    // U_m's 128-bit lane L = S_{4m+L}, S = low 128 + high 128 of V (hsum_ps's first step).
    let u: [__m512; 4] = std::array::from_fn(|m| {
        let (a, b) = (w[2 * m], w[2 * m + 1]);
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x88>(a, b),
            _mm512_shuffle_f32x4::<0xDD>(a, b),
        )
    });
    // Then (s0 + s2) + (s1 + s3) of every S, as hsum_ps's last two steps.
    let pair = |a: __m512, b: __m512| {
        _mm512_castps_pd(_mm512_add_ps(
            _mm512_unpacklo_ps(a, b),
            _mm512_unpackhi_ps(a, b),
        ))
    };
    let (x, y) = (pair(u[0], u[1]), pair(u[2], u[3]));
    _mm512_add_ps(
        _mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
        _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)),
    )
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
    let nb = acts.n / 32;
    let np = nb.div_ceil(2);
    let (wr, ar) = (w_rec(w), a_rec(w));
    let row_groups = n_rows.div_ceil(R);
    zeroed(panel, row_groups * np * wr);
    fill_weights(w, w_rows, n_rows, nb, panel);
    let n_tok = acts.n_tok;
    for g in 0..n_tok.div_ceil(T) {
        let a = acts.lines.as_ptr().add(g * np * ar);
        for rg in 0..row_groups {
            let wp = panel.as_ptr().add(rg * np * wr);
            let v = if has_mins(w) {
                micro::<true>(wp, a, np, wr, ar)
            } else {
                micro::<false>(wp, a, np, wr, ar)
            };
            for r in 0..R.min(n_rows - rg * R) {
                for t in 0..T.min(n_tok - g * T) {
                    out[(rg * R + r) * n_tok + g * T + t] = v[r * T + t];
                }
            }
        }
    }
}
