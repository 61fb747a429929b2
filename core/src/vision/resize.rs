//! Image resizing as Pillow does it (and llama.cpp's mtmd after it, which is the reference
//! for vision preprocessing): a separable convolution, horizontal pass then vertical pass,
//! with per-output-pixel filter taps normalized to sum 1 and applied in 22-bit fixed point
//! to 8-bit samples. Matching it exactly (not just closely) is what makes the pixel tensors
//! equal to the reference's, so every step below keeps the reference's arithmetic: f64 tap
//! positions, round-half-away-from-zero to fixed point, a 0.5 rounding bias, an arithmetic
//! shift and a clamp.

use super::decode::RgbImage;

/// Resampling filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filter {
    /// Triangle, support 1 (Gemma 3).
    Bilinear,
    /// Keys cubic with a = -0.5 (Pillow's; PyTorch uses -0.75), support 2 (Qwen2-VL).
    Bicubic,
    /// Lanczos-3, support 3 (Idefics3 / SmolVLM).
    Lanczos,
}

impl Filter {
    fn support(self) -> f64 {
        match self {
            Filter::Bilinear => 1.0,
            Filter::Bicubic => 2.0,
            Filter::Lanczos => 3.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        match self {
            Filter::Bilinear => {
                let x = x.abs();
                if x < 1.0 {
                    1.0 - x
                } else {
                    0.0
                }
            }
            Filter::Bicubic => {
                const A: f64 = -0.5;
                let x = x.abs();
                if x < 1.0 {
                    ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    (((x - 5.0) * x + 8.0) * x - 4.0) * A
                } else {
                    0.0
                }
            }
            // the window is [-3, 3): Pillow's bound, kept so the taps are the same
            Filter::Lanczos => {
                if (-3.0..3.0).contains(&x) {
                    sinc(x) * sinc(x / 3.0)
                } else {
                    0.0
                }
            }
        }
    }
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        let px = x * std::f64::consts::PI;
        px.sin() / px
    }
}

/// Fractional bits of the fixed-point taps: 32 bits less 8 for the sample, less 2 of
/// headroom for the sum.
const PRECISION_BITS: u32 = 22;

/// Taps of one axis: for output pixel `i`, input pixels `first[i] .. first[i] + count[i]`
/// with weights `weights[i * stride ..]`.
struct Taps {
    first: Vec<usize>,
    count: Vec<usize>,
    stride: usize,
    weights: Vec<i32>,
}

fn taps(in_size: usize, out_size: usize, filter: Filter) -> Taps {
    let scale = in_size as f64 / out_size as f64;
    // downsampling widens the filter (anti-aliasing); upsampling keeps it at its own width
    let filter_scale = scale.max(1.0);
    let support = filter.support() * filter_scale;
    let stride = support.ceil() as usize * 2 + 1;
    let inv = 1.0 / filter_scale;
    let one = f64::from(1u32 << PRECISION_BITS);
    let mut t = Taps {
        first: Vec::with_capacity(out_size),
        count: Vec::with_capacity(out_size),
        stride,
        weights: vec![0; out_size * stride],
    };
    let mut w = vec![0.0f64; stride];
    for i in 0..out_size {
        let center = (i as f64 + 0.5) * scale;
        // truncation toward zero, then clamped: the reference's int casts
        let lo = ((center - support + 0.5) as i64).max(0) as usize;
        let hi = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
        let n = hi.saturating_sub(lo);
        let mut sum = 0.0;
        for (k, wk) in w.iter_mut().enumerate().take(n) {
            *wk = filter.weight(((k + lo) as f64 - center + 0.5) * inv);
            sum += *wk;
        }
        for (k, wk) in w.iter().enumerate().take(n) {
            let v = if sum != 0.0 { wk / sum } else { *wk };
            let r = v * one + if v < 0.0 { -0.5 } else { 0.5 };
            t.weights[i * stride + k] = r as i32;
        }
        t.first.push(lo);
        t.count.push(n);
    }
    t
}

fn clip8(v: i32) -> u8 {
    (v >> PRECISION_BITS).clamp(0, 255) as u8
}

const BIAS: i32 = 1 << (PRECISION_BITS - 1);

#[inline(always)]
fn horizontal_body(src: &[u8], in_w: usize, h: usize, out_w: usize, t: &Taps) -> Vec<u8> {
    let mut out = vec![0u8; out_w * h * 3];
    for (row, orow) in src
        .chunks_exact(in_w * 3)
        .zip(out.chunks_exact_mut(out_w * 3))
    {
        for (x, o) in orow.chunks_exact_mut(3).enumerate() {
            let k = &t.weights[x * t.stride..x * t.stride + t.count[x]];
            // The taps' pixels as one slice, walked in step with the weights: no index
            // arithmetic or bounds check per sample (this loop is most of a resize's time).
            let px = &row[t.first[x] * 3..(t.first[x] + k.len()) * 3];
            let mut acc = [BIAS; 3];
            for (p, &wj) in px.chunks_exact(3).zip(k) {
                acc[0] += i32::from(p[0]) * wj;
                acc[1] += i32::from(p[1]) * wj;
                acc[2] += i32::from(p[2]) * wj;
            }
            for c in 0..3 {
                o[c] = clip8(acc[c]);
            }
        }
    }
    out
}

#[inline(always)]
fn vertical_body(src: &[u8], w: usize, out_h: usize, t: &Taps) -> Vec<u8> {
    let row_len = w * 3;
    let mut out = vec![0u8; row_len * out_h];
    let mut acc = vec![0i32; row_len];
    for y in 0..out_h {
        acc.fill(BIAS);
        let k = &t.weights[y * t.stride..y * t.stride + t.count[y]];
        for (j, &wj) in k.iter().enumerate() {
            let row = &src[(t.first[y] + j) * row_len..(t.first[y] + j + 1) * row_len];
            for (a, &p) in acc.iter_mut().zip(row) {
                *a += i32::from(p) * wj;
            }
        }
        for (o, &a) in out[y * row_len..(y + 1) * row_len].iter_mut().zip(&acc) {
            *o = clip8(a);
        }
    }
    out
}

// The two passes built a second time for AVX2 on x86-64 (8 lanes of i32 instead of the
// baseline's 4 for the vertical pass, most of a resize's time), chosen at run time. Integer
// sums: every build gives the same pixels.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn horizontal_avx2(src: &[u8], in_w: usize, h: usize, out_w: usize, t: &Taps) -> Vec<u8> {
    horizontal_body(src, in_w, h, out_w, t)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn vertical_avx2(src: &[u8], w: usize, out_h: usize, t: &Taps) -> Vec<u8> {
    vertical_body(src, w, out_h, t)
}

fn horizontal(src: &[u8], in_w: usize, h: usize, out_w: usize, t: &Taps) -> Vec<u8> {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has the feature the function was compiled for.
        return unsafe { horizontal_avx2(src, in_w, h, out_w, t) };
    }
    horizontal_body(src, in_w, h, out_w, t)
}

fn vertical(src: &[u8], w: usize, out_h: usize, t: &Taps) -> Vec<u8> {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: as above.
        return unsafe { vertical_avx2(src, w, out_h, t) };
    }
    vertical_body(src, w, out_h, t)
}

/// `img` resized to `width` x `height` (aspect ratio not kept). An axis whose size does not
/// change is not filtered. Both sizes must be at least 1.
pub fn resize(img: &RgbImage, width: u32, height: u32, filter: Filter) -> RgbImage {
    assert!(width > 0 && height > 0, "resize to {width}x{height}");
    let (in_w, in_h) = (img.width as usize, img.height as usize);
    let (out_w, out_h) = (width as usize, height as usize);
    let mut data = if out_w != in_w {
        horizontal(&img.data, in_w, in_h, out_w, &taps(in_w, out_w, filter))
    } else {
        img.data.clone()
    };
    if out_h != in_h {
        data = vertical(&data, out_w, out_h, &taps(in_h, out_h, filter));
    }
    RgbImage {
        width,
        height,
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(w: u32, h: u32) -> RgbImage {
        let mut img = RgbImage::filled(w, h, [0, 0, 0]);
        for y in 0..h {
            for x in 0..w {
                let i = ((y * w + x) * 3) as usize;
                img.data[i] = (x * 255 / w.max(2).saturating_sub(1).max(1)).min(255) as u8;
                img.data[i + 1] = (y * 255 / h.max(2).saturating_sub(1).max(1)).min(255) as u8;
                img.data[i + 2] = ((x + y) % 256) as u8;
            }
        }
        img
    }

    #[test]
    fn taps_sum_to_one_in_fixed_point() {
        for filter in [Filter::Bilinear, Filter::Bicubic, Filter::Lanczos] {
            for (i, o) in [(640, 896), (896, 640), (37, 544), (1024, 5)] {
                let t = taps(i, o, filter);
                for x in 0..o {
                    let s: i64 = t.weights[x * t.stride..x * t.stride + t.count[x]]
                        .iter()
                        .map(|&w| i64::from(w))
                        .sum();
                    // each tap is rounded on its own: the sum is 1.0 within one unit per tap
                    assert!(
                        (s - (1 << PRECISION_BITS)).abs() <= t.count[x] as i64,
                        "{filter:?} {i}->{o} pixel {x}: {s}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_flat_image_stays_flat() {
        let img = RgbImage::filled(37, 61, [10, 128, 250]);
        for filter in [Filter::Bilinear, Filter::Bicubic, Filter::Lanczos] {
            let r = resize(&img, 300, 17, filter);
            assert_eq!((r.width, r.height), (300, 17));
            assert!(r.data.chunks(3).all(|p| p == [10, 128, 250]), "{filter:?}");
        }
    }

    #[test]
    fn same_size_is_a_copy_and_one_axis_is_left_alone() {
        let img = gradient(40, 30);
        assert_eq!(resize(&img, 40, 30, Filter::Bicubic), img);
        // only the height changes: every column is resampled on its own
        let r = resize(&img, 40, 60, Filter::Bilinear);
        let col0: Vec<u8> = (0..30).map(|y| img.pixel(0, y)[0]).collect();
        assert!(col0.iter().all(|&v| v == 0));
        assert!((0..60).all(|y| r.pixel(0, y)[0] == 0));
    }

    #[test]
    fn matches_pillow_on_a_small_row() {
        // Expected values: Pillow 13.0.0, Image.resize on this 4x1 grey row
        let img = RgbImage {
            width: 4,
            height: 1,
            data: [0u8, 100, 200, 51]
                .iter()
                .flat_map(|&v| [v, v, v])
                .collect(),
        };
        let grey = |r: RgbImage| r.data.chunks(3).map(|p| p[0]).collect::<Vec<_>>();
        assert_eq!(grey(resize(&img, 2, 1, Filter::Bilinear)), vec![71, 122]);
        assert_eq!(grey(resize(&img, 2, 1, Filter::Bicubic)), vec![68, 127]);
        assert_eq!(grey(resize(&img, 2, 1, Filter::Lanczos)), vec![71, 131]);
        assert_eq!(
            grey(resize(&img, 7, 1, Filter::Bicubic)),
            vec![0, 26, 92, 166, 196, 100, 39]
        );
    }
}
