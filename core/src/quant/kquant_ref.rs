//! GGML's reference K-quant weight quantizers (Q4_K, Q5_K, Q6_K): the algorithms llama.cpp's
//! `llama-quantize` runs when no importance matrix is given, reimplemented so that a model
//! quantized here is byte-identical to one quantized there.
//!
//! Byte identity needs the same float operations in the same order: every sum is accumulated
//! left to right in f32, products are never fused (GGML's portable code is built without FMA),
//! rounding goes through GGML's `nearest_int` bit trick (round half to even, with its own
//! results outside ±2^22), and f16 scales round to nearest even.
//!
//! Q4_K and Q5_K fit each sub-block of 32 by an importance-weighted least-squares search over
//! trial grids (weights `rms + |x|`), then quantize the sub-block scales and mins to 6 bits.
//! Q6_K fits each sub-block of 16 with a symmetric grid (weights `x²`), then the scales to 8
//! bits.

use half::f16;

use super::float::f16_bits_to_f32;
use super::kquant::QK_K;

/// GGML's `GROUP_MAX_EPS`: a group whose largest magnitude is below it is all zeros.
const GROUP_MAX_EPS: f32 = 1e-15;

/// GGML's `nearest_int`: adds 1.5 * 2^23 and reads the low mantissa bits, which rounds half
/// to even for |v| <= 2^22 - 1 (and gives GGML's own values beyond, kept for identity).
#[inline(always)]
fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12_582_912.0f32).to_bits();
    (bits & 0x007f_ffff) as i32 - 0x0040_0000
}

#[inline(always)]
fn f16_round(x: f32) -> f16 {
    f16::from_f32(x)
}

/// Best `scale * q - min` grid (q in 0..=nmax) for one sub-block, by weighted least squares
/// over `nstep + 1` trial inverse scales `(rmin + rdelta * i + nmax) / (max - min)`. Writes the
/// chosen quants to `l` and returns (scale, min as a non-negative offset).
fn fit_min_scale(
    x: &[f32],
    w: &[f32],
    nmax: i32,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    l: &mut [u8],
) -> (f32, f32) {
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = w[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l[..n].fill(0);
        return (0.0, -min);
    }
    let nmaxf = nmax as f32;
    let mut iscale = nmaxf / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l[i] = q as u8;
        let diff = scale * q as f32 + min - x[i];
        best_error += w[i] * (diff * diff);
    }
    let mut aux = [0u8; 32];
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmaxf) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for i in 0..n {
            let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            aux[i] = q as u8;
            let qf = q as f32;
            sum_l += w[i] * qf;
            sum_l2 += w[i] * qf * qf;
            sum_xl += w[i] * qf * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * aux[i] as f32 + this_min - x[i];
                cur_error += w[i] * (diff * diff);
            }
            if cur_error < best_error {
                l[..n].copy_from_slice(&aux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Best symmetric grid `scale * (q - nmax)` (q - nmax in -nmax..nmax) for a sub-block,
/// weighting each element by x², over 19 trial scales around `-nmax / max`. Writes `q` to `l`.
fn fit_symmetric(x: &[f32], nmax: i32, l: &mut [u8]) -> f32 {
    let mut max = 0f32;
    let mut amax = 0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l[..x.len()].fill(0);
        return 0.0;
    }
    let nmaxf = nmax as f32;
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0f32, 0f32);
        for &v in x {
            let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1) as f32;
            let w = v * v;
            sumlx += w * v * q;
            suml2 += w * q * q;
        }
        (sumlx, suml2)
    };
    let store = |iscale: f32, l: &mut [u8]| {
        for (li, &v) in l.iter_mut().zip(x) {
            *li = (nmax + nearest_int(iscale * v).clamp(-nmax, nmax - 1)) as u8;
        }
    };
    let iscale = -nmaxf / max;
    store(iscale, l);
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9i32..=9 {
        if is == 0 {
            continue;
        }
        let iscale = -(nmaxf + 0.1f32 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            store(iscale, l);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Sub-block fits and 6-bit scale/min codes shared by Q4_K and Q5_K. Returns the block's
/// d, dmin, the packed 12 scale bytes and the quants (0..=nmax) of all 256 elements.
fn k4_block(x: &[f32], nmax: i32, rmin: f32, nstep: i32) -> (f16, f16, [u8; 12], [u8; QK_K]) {
    let mut l = [0u8; QK_K];
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    let mut max_scale = 0f32;
    let mut max_min = 0f32;
    for j in 0..8 {
        let sub = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0f32;
        for &v in sub {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let mut w = [0f32; 32];
        for (wi, &v) in w.iter_mut().zip(sub) {
            *wi = av_x + v.abs();
        }
        let (s, m) = fit_min_scale(sub, &w, nmax, rmin, 0.1, nstep, &mut l[32 * j..]);
        scales[j] = s;
        mins[j] = m;
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..8 {
        // GGML stores the int in a uint8_t first (wrapping), then caps it at 63.
        sc[j] = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        mn[j] = (nearest_int(inv_min * mins[j]) as u8).min(63);
    }
    let mut packed = [0u8; 12];
    for j in 0..4 {
        packed[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
        packed[j + 4] = mn[j] | ((mn[j + 4] >> 4) << 6);
        packed[j + 8] = (sc[j + 4] & 0x0F) | ((mn[j + 4] & 0x0F) << 4);
    }
    let d = f16_round(max_scale / 63.0);
    let dmin = f16_round(max_min / 63.0);
    let (df, dminf) = (
        f16_bits_to_f32(d.to_bits()),
        f16_bits_to_f32(dmin.to_bits()),
    );
    for j in 0..8 {
        let dl = df * sc[j] as f32;
        if dl == 0.0 {
            continue; // the fit's quants stay, as in GGML
        }
        let ml = dminf * mn[j] as f32;
        for i in 0..32 {
            l[32 * j + i] = nearest_int((x[32 * j + i] + ml) / dl).clamp(0, nmax) as u8;
        }
    }
    (d, dmin, packed, l)
}

/// Q4_K (144 B): d, dmin, scales[12], qs[128].
pub(crate) fn quant_q4_k_ref(x: &[f32], b: &mut [u8]) {
    let (d, dmin, packed, l) = k4_block(x, 15, -1.0, 20);
    b[0..2].copy_from_slice(&d.to_bits().to_le_bytes());
    b[2..4].copy_from_slice(&dmin.to_bits().to_le_bytes());
    b[4..16].copy_from_slice(&packed);
    let qs = &mut b[16..144];
    for c in 0..4 {
        for i in 0..32 {
            qs[c * 32 + i] = l[c * 64 + i] | (l[c * 64 + 32 + i] << 4);
        }
    }
}

/// Q5_K (176 B): d, dmin, scales[12], qh[32], qs[128].
pub(crate) fn quant_q5_k_ref(x: &[f32], b: &mut [u8]) {
    let (d, dmin, packed, l) = k4_block(x, 31, -0.5, 15);
    b[0..2].copy_from_slice(&d.to_bits().to_le_bytes());
    b[2..4].copy_from_slice(&dmin.to_bits().to_le_bytes());
    b[4..16].copy_from_slice(&packed);
    let (qh, qs) = b[16..176].split_at_mut(32);
    qh.fill(0);
    for c in 0..4 {
        for i in 0..32 {
            let lo = l[c * 64 + i];
            let hi = l[c * 64 + 32 + i];
            qh[i] |= ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1));
            qs[c * 32 + i] = (lo & 0x0F) | ((hi & 0x0F) << 4);
        }
    }
}

/// Q6_K (210 B): ql[128], qh[64], scales[16] (i8), d.
pub(crate) fn quant_q6_k_ref(x: &[f32], b: &mut [u8]) {
    let mut l = [0u8; QK_K];
    let mut scales = [0f32; 16];
    let mut max_scale = 0f32;
    let mut max_abs_scale = 0f32;
    for ib in 0..16 {
        let s = fit_symmetric(&x[16 * ib..16 * ib + 16], 32, &mut l[16 * ib..]);
        scales[ib] = s;
        if s.abs() > max_abs_scale {
            max_abs_scale = s.abs();
            max_scale = s;
        }
    }
    if max_abs_scale < GROUP_MAX_EPS {
        b[..210].fill(0);
        return;
    }
    let iscale = -128.0f32 / max_scale;
    let d = f16_round(1.0 / iscale);
    let mut sc = [0i8; 16];
    for ib in 0..16 {
        sc[ib] = nearest_int(iscale * scales[ib]).min(127) as i8;
    }
    let df = f16_bits_to_f32(d.to_bits());
    for j in 0..16 {
        let dl = df * sc[j] as f32;
        if dl == 0.0 {
            continue;
        }
        for i in 0..16 {
            l[16 * j + i] = (nearest_int(x[16 * j + i] / dl).clamp(-32, 31) + 32) as u8;
        }
    }
    let (ql, rest) = b.split_at_mut(128);
    let (qh, rest) = rest.split_at_mut(64);
    for h in 0..2 {
        let lh = &l[h * 128..h * 128 + 128];
        for i in 0..32 {
            let (q1, q2, q3, q4) = (lh[i], lh[i + 32], lh[i + 64], lh[i + 96]);
            ql[h * 64 + i] = (q1 & 0x0F) | ((q3 & 0x0F) << 4);
            ql[h * 64 + 32 + i] = (q2 & 0x0F) | ((q4 & 0x0F) << 4);
            qh[h * 32 + i] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
        }
    }
    for (o, s) in rest[..16].iter_mut().zip(sc) {
        *o = s as u8;
    }
    rest[16..18].copy_from_slice(&d.to_bits().to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-0.5), 0);
        assert_eq!(nearest_int(-1.5), -2);
        assert_eq!(nearest_int(3.49), 3);
        assert_eq!(nearest_int(-7.7), -8);
    }
}
