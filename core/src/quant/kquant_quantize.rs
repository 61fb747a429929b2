//! Quantization of f32 data to Q4_K, Q6_K and Q8_K.
//!
//! The weight quantizers guarantee a known bound: in the "covering" encoding every scale is
//! rounded *up*, so the quantization grid of each sub-block always covers its values and no
//! value is clamped. The error of an element is then at most half the sub-block's step, and
//! that step exceeds the ideal one by at most one step of the super-block scale (see the
//! property tests). Q6_K uses it directly; Q4_K also tries a least-squares fit per sub-block
//! and keeps whichever has the lower importance-weighted error.
//!
//! Q8_K (activations) uses d = amax / 127 with round-half-away, like Q8_0 but with an f32
//! scale, plus the per-16 sums that the K-quant dot products need.

use half::f16;

use super::float::round_half_away;
use super::kquant::QK_K;

/// The smallest f16 that is >= `x` (for finite, non-negative `x`).
fn f16_ceil(x: f32) -> f16 {
    let h = f16::from_f32(x);
    if h.to_f32() < x && h.is_finite() {
        f16::from_bits(h.to_bits() + 1)
    } else {
        h
    }
}

/// ceil(v / unit) clamped to `0..=max`; 0 when unit is 0.
fn ceil_units(v: f32, unit: f32, max: u8) -> u8 {
    if unit > 0.0 {
        ((v / unit).ceil().max(0.0) as u32).min(max as u32) as u8
    } else {
        0
    }
}

/// Nearest integer to `v`, clamped to `lo..=hi`.
fn round_clamp(v: f32, lo: i32, hi: i32) -> i32 {
    round_half_away(v).clamp(lo, hi)
}

/// Q4_K: two candidate encodings of each super-block, keeping the one with the lower
/// importance-weighted squared error. The "covering" one has a proven per-element bound (see
/// the module doc); the "fitted" one searches each sub-block's scale and min by weighted least
/// squares, which is usually more accurate. Choosing by error keeps the covering bound valid
/// for the weighted RMS error of the result.
pub(crate) fn quant_q4_k(x: &[f32], b: &mut [u8]) {
    let w = importance(&x[..QK_K]);
    let mut cover = [0u8; 144];
    covering_q4_k(x, &mut cover);
    let mut fit = [0u8; 144];
    fitted_q4_k(x, &w, &mut fit);
    let best = if weighted_sse(&fit, x, &w) < weighted_sse(&cover, x, &w) {
        &fit
    } else {
        &cover
    };
    b[..144].copy_from_slice(best);
}

/// Importance weights of a super-block's elements: rms + |x|, so large values, which matter
/// most for a dot product, are fitted more closely.
pub(crate) fn importance(x: &[f32]) -> [f32; QK_K] {
    let rms = (x.iter().map(|v| v * v).sum::<f32>() / QK_K as f32).sqrt();
    let mut w = [0f32; QK_K];
    for (wi, xi) in w.iter_mut().zip(x) {
        *wi = rms + xi.abs();
    }
    w
}

/// Sum of w * (decoded - x)^2 over a Q4_K block.
pub(crate) fn weighted_sse(block: &[u8], x: &[f32], w: &[f32]) -> f64 {
    let mut y = [0f32; QK_K];
    super::kquant::dequant_q4_k(block, &mut y);
    y.iter()
        .zip(x)
        .zip(w)
        .map(|((a, b), w)| *w as f64 * ((a - b) as f64).powi(2))
        .sum()
}

/// The covering encoding: every scale rounded up so no value is clamped.
pub(crate) fn covering_q4_k(x: &[f32], b: &mut [u8]) {
    // Per sub-block of 32: the offset the grid must reach below zero, and the top value.
    let mut offset = [0f32; 8];
    let mut top = [0f32; 8];
    for j in 0..8 {
        let sub = &x[j * 32..j * 32 + 32];
        let lo = sub.iter().fold(0f32, |a, v| a.min(*v));
        offset[j] = -lo;
        top[j] = sub.iter().fold(lo, |a, v| a.max(*v));
    }
    let dmin = f16_ceil(offset.iter().fold(0f32, |a, v| a.max(*v)) / 63.0);
    let dminf = dmin.to_f32();
    let mut mins = [0u8; 8];
    let mut need = [0f32; 8];
    for j in 0..8 {
        mins[j] = ceil_units(offset[j], dminf, 63);
        need[j] = (top[j] + mins[j] as f32 * dminf) / 15.0;
    }
    let d = f16_ceil(need.iter().fold(0f32, |a, v| a.max(*v)) / 63.0);
    let mut scales = [0u8; 8];
    for j in 0..8 {
        scales[j] = ceil_units(need[j], d.to_f32(), 63);
    }
    encode_q4_k(x, d, dmin, &scales, &mins, b);
}

/// The fitted encoding: per sub-block (scale, offset) from [`fit_scale_offset`], then the
/// super-block scales rounded to nearest.
fn fitted_q4_k(x: &[f32], w: &[f32], b: &mut [u8]) {
    let mut fits = [(0f32, 0f32); 8];
    for (j, f) in fits.iter_mut().enumerate() {
        *f = fit_scale_offset(&x[j * 32..j * 32 + 32], &w[j * 32..j * 32 + 32], 15);
    }
    let d = f16::from_f32(fits.iter().fold(0f32, |a, f| a.max(f.0)) / 63.0);
    let dmin = f16::from_f32(fits.iter().fold(0f32, |a, f| a.max(f.1)) / 63.0);
    let units = |v: f32, unit: f16| {
        let u = unit.to_f32();
        if u > 0.0 {
            round_clamp(v / u, 0, 63) as u8
        } else {
            0
        }
    };
    let scales = fits.map(|f| units(f.0, d));
    let mins = fits.map(|f| units(f.1, dmin));
    encode_q4_k(x, d, dmin, &scales, &mins, b);
}

/// Best (scale >= 0, offset >= 0) for `x ~ scale * q - offset` with q in 0..=nmax, by
/// importance-weighted least squares over a small sweep of trial grids (the trial scale is
/// stretched from (nmax - 1) / range to (nmax + 1) / range, since a slightly clipped grid
/// often fits the bulk of the values better).
fn fit_scale_offset(x: &[f32], w: &[f32], nmax: i32) -> (f32, f32) {
    let min = x.iter().fold(0f32, |a, v| a.min(*v));
    let max = x.iter().fold(min, |a, v| a.max(*v));
    if max <= min {
        return (0.0, -min);
    }
    let range = max - min;
    let mut best = ((range / nmax as f32), -min);
    let mut best_err = f32::INFINITY;
    for step in 0..=20 {
        let iscale = (nmax as f32 - 1.0 + 0.1 * step as f32) / range;
        let (mut sw, mut sl, mut sl2, mut sx, mut sxl) = (0f32, 0f32, 0f32, 0f32, 0f32);
        let mut q = [0f32; 32];
        for i in 0..x.len() {
            let l = round_clamp(iscale * (x[i] - min), 0, nmax) as f32;
            q[i] = l;
            sw += w[i];
            sl += w[i] * l;
            sl2 += w[i] * l * l;
            sx += w[i] * x[i];
            sxl += w[i] * x[i] * l;
        }
        let det = sw * sl2 - sl * sl;
        if det <= 0.0 || sl2 <= 0.0 {
            continue;
        }
        let mut scale = (sw * sxl - sx * sl) / det;
        let mut shift = (sl2 * sx - sl * sxl) / det;
        if shift > 0.0 {
            // The format needs the grid to start at or below zero.
            shift = 0.0;
            scale = sxl / sl2;
        }
        if scale <= 0.0 {
            continue;
        }
        let err: f32 = (0..x.len())
            .map(|i| w[i] * (scale * q[i] + shift - x[i]).powi(2))
            .sum();
        if err < best_err {
            best_err = err;
            best = (scale, -shift);
        }
    }
    best
}

/// Writes a Q4_K block with the given super-block scales and 6-bit sub-block scales and
/// mins, choosing each quant by rounding with the same f32 products the dequantizer forms.
fn encode_q4_k(x: &[f32], d: f16, dmin: f16, scales: &[u8; 8], mins: &[u8; 8], b: &mut [u8]) {
    b[0..2].copy_from_slice(&d.to_bits().to_le_bytes());
    b[2..4].copy_from_slice(&dmin.to_bits().to_le_bytes());
    pack_scale_min_k4(scales, mins, &mut b[4..16]);
    let qs = &mut b[16..144];
    qs.fill(0);
    for j in 0..8 {
        let dl = d.to_f32() * scales[j] as f32;
        let ml = dmin.to_f32() * mins[j] as f32;
        let inv = if dl > 0.0 { 1.0 / dl } else { 0.0 };
        for l in 0..32 {
            let q = round_clamp((x[j * 32 + l] + ml) * inv, 0, 15) as u8;
            qs[(j / 2) * 32 + l] |= q << (4 * (j % 2));
        }
    }
}

/// Packs 8 six-bit scales and mins the way [`super::kquant::scale_min_k4`] reads them.
fn pack_scale_min_k4(sc: &[u8; 8], mn: &[u8; 8], s: &mut [u8]) {
    for j in 0..4 {
        s[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
        s[j + 4] = (mn[j] & 63) | ((mn[j + 4] >> 4) << 6);
        s[j + 8] = (sc[j + 4] & 0x0F) | ((mn[j + 4] & 0x0F) << 4);
    }
}

pub(crate) fn quant_q6_k(x: &[f32], b: &mut [u8]) {
    // Ideal step per sub-block of 16: the largest magnitude lands on +-31, inside -32..=31.
    let mut step = [0f32; 16];
    for j in 0..16 {
        let amax = x[j * 16..j * 16 + 16]
            .iter()
            .fold(0f32, |a, v| a.max(v.abs()));
        step[j] = amax / 31.0;
    }
    let d = f16_ceil(step.iter().fold(0f32, |a, v| a.max(*v)) / 127.0);
    let df = d.to_f32();
    let mut scales = [0u8; 16];
    for j in 0..16 {
        scales[j] = ceil_units(step[j], df, 127);
    }
    let (ql, rest) = b.split_at_mut(128);
    let (qh, rest) = rest.split_at_mut(64);
    ql.fill(0);
    qh.fill(0);
    for e in 0..QK_K {
        let dl = df * scales[e / 16] as f32;
        let inv = if dl > 0.0 { 1.0 / dl } else { 0.0 };
        let q = (round_clamp(x[e] * inv, -32, 31) + 32) as u8;
        let (h, s, l) = (e / 128, (e % 128) / 32, e % 32);
        ql[h * 64 + (s % 2) * 32 + l] |= (q & 0x0F) << (4 * (s / 2));
        qh[h * 32 + l] |= (q >> 4) << (2 * s);
    }
    rest[0..16].copy_from_slice(&scales);
    rest[16..18].copy_from_slice(&d.to_bits().to_le_bytes());
}

/// Quantizes 256 activations to Q8_K: f32 scale amax/127, i8 quants, i16 sums per 16.
pub fn quant_q8_k(x: &[f32], b: &mut [u8]) {
    let amax = x[..QK_K].iter().fold(0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
    b[0..4].copy_from_slice(&d.to_le_bytes());
    for g in 0..16 {
        let mut sum = 0i32;
        for l in 0..16 {
            let q = round_clamp(x[g * 16 + l] * id, -127, 127);
            sum += q;
            b[4 + g * 16 + l] = q as i8 as u8;
        }
        b[260 + 2 * g..262 + 2 * g].copy_from_slice(&(sum as i16).to_le_bytes());
    }
}
