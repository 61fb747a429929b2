//! The two inner products of attention over blocks of f32 keys and values: query·key scores
//! for a block of query vectors and keys, and the weighted sum of value rows.
//!
//! Both give, for every single (query, key) score and every output element, exactly the bits
//! of the plain one-pair code (`simd::dot`: sixteen lanes summed in order; `simd::axpy`:
//! `o += w·v` in key order). A query's result therefore does not depend on which other
//! queries or keys share a block, nor on how work is split across threads. On x86-64 with
//! AVX-512 the blocks go through register-tiled kernels (4 queries × 4 keys of scores; 4
//! queries × 64 output dims of sums), which read each key and value row once per tile
//! instead of once per query.

use super::simd;

/// Whether the AVX-512 kernels run for these head sizes on this CPU (else the portable ones).
pub fn use_avx512(hk: usize, hv: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        hk.is_multiple_of(16) && hv.is_multiple_of(16) && has_avx512()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (hk, hv);
        false
    }
}

#[cfg(target_arch = "x86_64")]
fn has_avx512() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        is_x86_feature_detected!("avx512f")
            && std::env::var("WEFT_ATTN_KERNELS").as_deref() != Ok("portable")
    })
}

/// `out[qi·out_stride + j] = dot(q_qi, k_j) · scale` for `qi < nq`, `j < nk`, where query
/// `qi` is `q[qi·hk..][..hk]` and key `j` is `k[j·hk..][..hk]`.
#[allow(clippy::too_many_arguments)]
pub fn scores(
    q: &[f32],
    nq: usize,
    k: &[f32],
    nk: usize,
    hk: usize,
    scale: f32,
    out: &mut [f32],
    out_stride: usize,
    fast: bool,
) {
    assert!(q.len() >= nq * hk && k.len() >= nk * hk);
    assert!(nq == 0 || nk == 0 || out.len() >= (nq - 1) * out_stride + nk);
    #[cfg(target_arch = "x86_64")]
    if fast {
        // SAFETY: `fast` comes from `use_avx512` (features present, hk a multiple of 16);
        // the lengths were checked above.
        unsafe { avx512::scores(q, nq, k, nk, hk, scale, out, out_stride) };
        return;
    }
    let _ = fast;
    for qi in 0..nq {
        let qr = &q[qi * hk..][..hk];
        for j in 0..nk {
            out[qi * out_stride + j] = simd::dot(qr, &k[j * hk..][..hk]) * scale;
        }
    }
}

/// Weighted sums over one block of `nk` value rows: for `qi < nq` and `j` in
/// `lo[qi]..hi[qi]` (ascending, within `0..nk`), `acc_qi[d] += w[qi·w_stride + j] · v_j[d]`
/// for `d < nd`, where `v_j` is `v[j·v_stride..]` and `acc_qi` is `acc[qi·acc_stride..]`.
#[allow(clippy::too_many_arguments)]
pub fn weighted_sum(
    w: &[f32],
    w_stride: usize,
    nq: usize,
    lo: &[usize],
    hi: &[usize],
    v: &[f32],
    v_stride: usize,
    nk: usize,
    nd: usize,
    acc: &mut [f32],
    acc_stride: usize,
    fast: bool,
) {
    assert!(lo.len() >= nq && hi.len() >= nq);
    assert!(nk == 0 || v.len() >= (nk - 1) * v_stride + nd);
    assert!(nq == 0 || acc.len() >= (nq - 1) * acc_stride + nd);
    for qi in 0..nq {
        assert!(lo[qi] <= hi[qi] && hi[qi] <= nk);
        assert!(hi[qi] == 0 || w.len() >= qi * w_stride + hi[qi]);
    }
    #[cfg(target_arch = "x86_64")]
    if fast && nd.is_multiple_of(16) {
        // SAFETY: `fast` comes from `use_avx512`; every index the kernel touches was
        // checked above.
        unsafe { avx512::weighted_sum(w, w_stride, nq, lo, hi, v, v_stride, nd, acc, acc_stride) };
        return;
    }
    let _ = fast;
    for qi in 0..nq {
        let a = &mut acc[qi * acc_stride..][..nd];
        for j in lo[qi]..hi[qi] {
            simd::axpy(a, w[qi * w_stride + j], &v[j * v_stride..][..nd]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// Queries per tile.
    const TQ: usize = 4;
    /// Keys per score tile.
    const TK: usize = 4;

    /// See [`super::scores`]; `hk` is a multiple of 16.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn scores(
        q: &[f32],
        nq: usize,
        k: &[f32],
        nk: usize,
        hk: usize,
        scale: f32,
        out: &mut [f32],
        out_stride: usize,
    ) {
        let mut tile = [0f32; 16];
        let mut q0 = 0;
        while q0 < nq {
            let tq = (nq - q0).min(TQ);
            // Missing queries/keys of an edge tile repeat the last one; their results are
            // not stored.
            let qp: [*const f32; TQ] =
                std::array::from_fn(|i| q.as_ptr().add((q0 + i.min(tq - 1)) * hk));
            let mut j0 = 0;
            while j0 < nk {
                let tk = (nk - j0).min(TK);
                let kp: [*const f32; TK] =
                    std::array::from_fn(|i| k.as_ptr().add((j0 + i.min(tk - 1)) * hk));
                let s = tile_scores(qp, kp, hk, scale);
                _mm512_storeu_ps(tile.as_mut_ptr(), s);
                for i in 0..tq {
                    let o = &mut out[(q0 + i) * out_stride + j0..][..tk];
                    o.copy_from_slice(&tile[i * TK..i * TK + tk]);
                }
                j0 += TK;
            }
            q0 += TQ;
        }
    }

    /// The 16 scores of a 4 × 4 tile, lane `i·4 + j` for query `i`, key `j`. Each pair keeps
    /// sixteen lane sums of products (`simd::dot`'s lanes), which are then added in lane order
    /// from zero, as `simd::dot` does, by transposing the 16 accumulators.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn tile_scores(
        qp: [*const f32; TQ],
        kp: [*const f32; TK],
        hk: usize,
        scale: f32,
    ) -> __m512 {
        let mut acc = [_mm512_setzero_ps(); 16];
        let mut c = 0;
        while c < hk {
            let kv: [__m512; TK] = std::array::from_fn(|j| _mm512_loadu_ps(kp[j].add(c)));
            for i in 0..TQ {
                let qv = _mm512_loadu_ps(qp[i].add(c));
                for j in 0..TK {
                    // Multiply, then add: no fused multiply-add, as in `simd::dot`.
                    let p = _mm512_mul_ps(qv, kv[j]);
                    acc[i * TK + j] = _mm512_add_ps(acc[i * TK + j], p);
                }
            }
            c += 16;
        }
        let t = transpose16(acc);
        let mut s = _mm512_setzero_ps();
        for v in t {
            s = _mm512_add_ps(s, v);
        }
        // `simd::dot` adds its (empty) tail sum, 0.0, then attention scales.
        s = _mm512_add_ps(s, _mm512_setzero_ps());
        _mm512_mul_ps(s, _mm512_set1_ps(scale))
    }

    /// Transposes 16 vectors of 16 lanes: lane `p` of result `l` is lane `l` of input `p`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
        // 32-bit interleave of row pairs within 128-bit lanes.
        let mut a = [_mm512_setzero_ps(); 16];
        for i in 0..8 {
            a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        // 64-bit interleave: b[4k + e] holds, in 128-bit lane L, element 4L + e of rows
        // 4k..4k+4.
        let mut b = [_mm512_setzero_ps(); 16];
        for k in 0..4 {
            let (x0, x1) = (_mm512_castps_pd(a[4 * k]), _mm512_castps_pd(a[4 * k + 1]));
            let (x2, x3) = (
                _mm512_castps_pd(a[4 * k + 2]),
                _mm512_castps_pd(a[4 * k + 3]),
            );
            b[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(x0, x2));
            b[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x0, x2));
            b[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(x1, x3));
            b[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(x1, x3));
        }
        // 4 × 4 transpose of 128-bit lanes among b[e], b[4 + e], b[8 + e], b[12 + e].
        let mut t = [_mm512_setzero_ps(); 16];
        for e in 0..4 {
            let c0 = _mm512_shuffle_f32x4::<0b01_00_01_00>(b[e], b[4 + e]);
            let c1 = _mm512_shuffle_f32x4::<0b01_00_01_00>(b[8 + e], b[12 + e]);
            let c2 = _mm512_shuffle_f32x4::<0b11_10_11_10>(b[e], b[4 + e]);
            let c3 = _mm512_shuffle_f32x4::<0b11_10_11_10>(b[8 + e], b[12 + e]);
            t[e] = _mm512_shuffle_f32x4::<0b10_00_10_00>(c0, c1);
            t[4 + e] = _mm512_shuffle_f32x4::<0b11_01_11_01>(c0, c1);
            t[8 + e] = _mm512_shuffle_f32x4::<0b10_00_10_00>(c2, c3);
            t[12 + e] = _mm512_shuffle_f32x4::<0b11_01_11_01>(c2, c3);
        }
        t
    }

    /// See [`super::weighted_sum`]; `nd` is a multiple of 16.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn weighted_sum(
        w: &[f32],
        w_stride: usize,
        nq: usize,
        lo: &[usize],
        hi: &[usize],
        v: &[f32],
        v_stride: usize,
        nd: usize,
        acc: &mut [f32],
        acc_stride: usize,
    ) {
        let mut q0 = 0;
        while q0 < nq {
            let tq = (nq - q0).min(TQ);
            let mut d0 = 0;
            while d0 < nd {
                match (nd - d0) / 16 {
                    1 => sum_tile::<1>(
                        w, w_stride, q0, tq, lo, hi, v, v_stride, d0, acc, acc_stride,
                    ),
                    2 => sum_tile::<2>(
                        w, w_stride, q0, tq, lo, hi, v, v_stride, d0, acc, acc_stride,
                    ),
                    3 => sum_tile::<3>(
                        w, w_stride, q0, tq, lo, hi, v, v_stride, d0, acc, acc_stride,
                    ),
                    _ => sum_tile::<4>(
                        w, w_stride, q0, tq, lo, hi, v, v_stride, d0, acc, acc_stride,
                    ),
                }
                d0 += 16 * ((nd - d0) / 16).min(4);
            }
            q0 += TQ;
        }
    }

    /// One tile of [`weighted_sum`]: queries `q0..q0 + tq` (at most 4) × `16·NZ` dims from
    /// `d0`, accumulators in registers for the whole block. A query outside its key range
    /// keeps its sums through a zero write mask (not by adding zero, which could turn a -0.0
    /// into +0.0), so every sum sees exactly its own terms, in key order.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn sum_tile<const NZ: usize>(
        w: &[f32],
        w_stride: usize,
        q0: usize,
        tq: usize,
        lo: &[usize],
        hi: &[usize],
        v: &[f32],
        v_stride: usize,
        d0: usize,
        acc: &mut [f32],
        acc_stride: usize,
    ) {
        let ap: [*mut f32; TQ] =
            std::array::from_fn(|i| acc.as_mut_ptr().add((q0 + i.min(tq - 1)) * acc_stride + d0));
        let wp: [*const f32; TQ] =
            std::array::from_fn(|i| w.as_ptr().add((q0 + i.min(tq - 1)) * w_stride));
        let (jlo, jhi): ([usize; TQ], [usize; TQ]) = (
            std::array::from_fn(|i| if i < tq { lo[q0 + i] } else { 0 }),
            std::array::from_fn(|i| if i < tq { hi[q0 + i] } else { 0 }),
        );
        let start = (0..tq).map(|i| jlo[i]).min().unwrap_or(0);
        let end = (0..tq).map(|i| jhi[i]).max().unwrap_or(0);
        let mut s = [[_mm512_setzero_ps(); NZ]; TQ];
        for i in 0..tq {
            for (z, sz) in s[i].iter_mut().enumerate() {
                *sz = _mm512_loadu_ps(ap[i].add(16 * z));
            }
        }
        for j in start..end {
            let vp = v.as_ptr().add(j * v_stride + d0);
            let vz: [__m512; NZ] = std::array::from_fn(|z| _mm512_loadu_ps(vp.add(16 * z)));
            for i in 0..TQ {
                let m: __mmask16 = if j >= jlo[i] && j < jhi[i] { 0xFFFF } else { 0 };
                // Load the weight only where it is in range (a masked query may sit past
                // the end of `w`).
                let wi = if m != 0 { *wp[i].add(j) } else { 0.0 };
                let wv = _mm512_set1_ps(wi);
                for z in 0..NZ {
                    let p = _mm512_mul_ps(wv, vz[z]);
                    s[i][z] = _mm512_mask_add_ps(s[i][z], m, s[i][z], p);
                }
            }
        }
        for i in 0..tq {
            for (z, sz) in s[i].iter().enumerate() {
                _mm512_storeu_ps(ap[i].add(16 * z), *sz);
            }
        }
    }
}
