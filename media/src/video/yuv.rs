//! RGB frames into the planar YUV 4:2:0 (I420) pictures the H.264 encoder takes.
//!
//! BT.601 matrix, limited range (Y 16..=235, Cb/Cr 16..=240): what a decoder assumes when the
//! stream says nothing, what the SPS's VUI declares here (`encode.rs`), and what this crate's
//! decoder (OpenH264's `write_rgb8`) and FFmpeg/PyAV turn back into RGB. Integer arithmetic with
//! rounding, so the same frame gives the same bytes on every machine (OpenH264's own converter
//! truncates and has SIMD paths).
//!
//! Chroma: the mean of each 2x2 block. Both decoders above repeat each chroma sample over its
//! 2x2 block, so the block mean is the choice that minimises their error on smooth content.

use image::RgbImage;

/// One I420 picture: `width * height` luma bytes, then the Cb and Cr planes of
/// `(width / 2) * (height / 2)` bytes each. Width and height are even (checked by the caller).
pub fn rgb_to_i420(image: &RgbImage) -> Vec<u8> {
    let (width, height) = (image.width() as usize, image.height() as usize);
    let (cw, ch) = (width / 2, height / 2);
    let mut out = vec![0u8; width * height + 2 * cw * ch];
    let (luma, chroma) = out.split_at_mut(width * height);
    let (cb, cr) = chroma.split_at_mut(cw * ch);
    let rgb = image.as_raw();
    let px = |x: usize, y: usize| {
        let i = (y * width + x) * 3;
        [
            i32::from(rgb[i]),
            i32::from(rgb[i + 1]),
            i32::from(rgb[i + 2]),
        ]
    };
    for y in 0..height {
        for x in 0..width {
            luma[y * width + x] = y_of(px(x, y));
        }
    }
    for cy in 0..ch {
        for cx in 0..cw {
            let mut sum = [0i32; 3];
            for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                let p = px(2 * cx + dx, 2 * cy + dy);
                for c in 0..3 {
                    sum[c] += p[c];
                }
            }
            let (u, v) = uv_of_sum4(sum);
            cb[cy * cw + cx] = u;
            cr[cy * cw + cx] = v;
        }
    }
    out
}

/// Limited-range BT.601 luma in 8.8 fixed point: 219/255 * (0.299 R + 0.587 G + 0.114 B) + 16,
/// rounded.
fn y_of([r, g, b]: [i32; 3]) -> u8 {
    (((66 * r + 129 * g + 25 * b + 128) >> 8) + 16) as u8
}

/// Cb and Cr of the mean of four pixels, from their channel sums (the mean's division by 4
/// folded into the shift): 224/255 * (B - Y) / 1.772 + 128 and 224/255 * (R - Y) / 1.402 + 128,
/// rounded. Results lie in 16..=240 for any input, so the casts cannot wrap.
fn uv_of_sum4([r, g, b]: [i32; 3]) -> (u8, u8) {
    let u = ((-38 * r - 74 * g + 112 * b + 512) >> 10) + 128;
    let v = ((112 * r - 94 * g - 18 * b + 512) >> 10) + 128;
    (u as u8, v as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primaries_and_greys_land_on_the_bt601_limited_values() {
        // Black, white and mid grey: Y 16, 235, 126; chroma neutral.
        assert_eq!(y_of([0, 0, 0]), 16);
        assert_eq!(y_of([255, 255, 255]), 235);
        assert_eq!(y_of([128, 128, 128]), 126);
        assert_eq!(uv_of_sum4([4 * 255; 3]), (128, 128));
        assert_eq!(uv_of_sum4([0; 3]), (128, 128));
        // Pure red: Y 82, Cb 90, Cr 240 (the BT.601 table values).
        assert_eq!(y_of([255, 0, 0]), 82);
        assert_eq!(uv_of_sum4([4 * 255, 0, 0]), (90, 240));
        // Pure blue: Y 41, Cb 240, Cr 110.
        assert_eq!(y_of([0, 0, 255]), 41);
        assert_eq!(uv_of_sum4([0, 0, 4 * 255]), (240, 110));
    }

    #[test]
    fn planes_are_laid_out_and_chroma_averaged() {
        // 4x2: left 2x2 block red, right block blue.
        let image = RgbImage::from_fn(4, 2, |x, _| {
            if x < 2 {
                image::Rgb([255, 0, 0])
            } else {
                image::Rgb([0, 0, 255])
            }
        });
        let i420 = rgb_to_i420(&image);
        assert_eq!(i420.len(), 8 + 2 + 2);
        assert_eq!(&i420[..8], &[82, 82, 41, 41, 82, 82, 41, 41]);
        assert_eq!(&i420[8..10], &[90, 240]);
        assert_eq!(&i420[10..12], &[240, 110]);
    }
}
