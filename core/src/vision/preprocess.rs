//! From a decoded image to the vision encoder's input tensor, as llama.cpp's mtmd does it
//! (the reference the tests hold Weft to, tests/data/vision/): resize, pad, scale to [0, 1],
//! normalize per channel, planar layout.

use super::decode::RgbImage;
use super::resize::{resize, Filter};

/// An encoder input: f32, planar `[channel][y][x]` (the layout a patch convolution reads).
#[derive(Clone, Debug, PartialEq)]
pub struct PixelTensor {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub data: Vec<f32>,
}

impl PixelTensor {
    /// Little-endian bytes of `data`, e.g. to hash or store the tensor.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.data.iter().flat_map(|v| v.to_le_bytes()).collect()
    }
}

/// `(v / 255 - mean[c]) / std[c]` for every sample, in f32 and in that order of operations
/// (the reference's), laid out planar.
pub fn normalize(img: &RgbImage, mean: [f32; 3], std: [f32; 3]) -> PixelTensor {
    let plane = img.width as usize * img.height as usize;
    let mut data = vec![0.0f32; plane * 3];
    for (i, px) in img.data.chunks_exact(3).enumerate() {
        for c in 0..3 {
            data[c * plane + i] = (f32::from(px[c]) / 255.0 - mean[c]) / std[c];
        }
    }
    PixelTensor {
        channels: 3,
        height: img.height as usize,
        width: img.width as usize,
        data,
    }
}

/// `img` scaled to fit inside `width` x `height` with its aspect ratio kept, centred on a
/// `pad` background. The scaled size rounds up (`ceil(side * scale)`, capped at the target)
/// and the offsets round down, in f32, as mtmd's default padding does. An image already of
/// the target size is returned as it is.
pub fn fit_and_pad(
    img: &RgbImage,
    width: u32,
    height: u32,
    filter: Filter,
    pad: [u8; 3],
) -> RgbImage {
    if img.width == width && img.height == height {
        return img.clone();
    }
    let scale_w = width as f32 / img.width as f32;
    let scale_h = height as f32 / img.height as f32;
    let scale = scale_w.min(scale_h);
    let new_w = ((img.width as f32 * scale).ceil() as u32).clamp(1, width);
    let new_h = ((img.height as f32 * scale).ceil() as u32).clamp(1, height);
    let scaled = resize(img, new_w, new_h, filter);
    let mut out = RgbImage::filled(width, height, pad);
    let (ox, oy) = ((width - new_w) / 2, (height - new_h) / 2);
    let row = new_w as usize * 3;
    for y in 0..new_h as usize {
        let dst = ((oy as usize + y) * width as usize + ox as usize) * 3;
        out.data[dst..dst + row].copy_from_slice(&scaled.data[y * row..(y + 1) * row]);
    }
    out
}

/// Gemma 3's image preprocessing (`clip.projector_type` "gemma3"): one square encoder input
/// of `image_size` (896 for every Gemma 3), the image fitted with bilinear filtering and
/// padded with black, then normalized with the mmproj's mean and std (0.5, 0.5).
///
/// transformers' Gemma3ImageProcessor stretches to the square instead; Weft follows llama.cpp,
/// whose GGUFs it runs. Returns the padded 8-bit image too (what the tests compare exactly).
pub fn gemma3(
    img: &RgbImage,
    image_size: u32,
    mean: [f32; 3],
    std: [f32; 3],
) -> (RgbImage, PixelTensor) {
    let square = fit_and_pad(img, image_size, image_size, Filter::Bilinear, [0, 0, 0]);
    let tensor = normalize(&square, mean, std);
    (square, tensor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_is_planar_and_exact() {
        let img = RgbImage {
            width: 2,
            height: 1,
            data: vec![0, 128, 255, 10, 20, 30],
        };
        let t = normalize(&img, [0.5; 3], [0.5; 3]);
        assert_eq!((t.channels, t.height, t.width), (3, 1, 2));
        assert_eq!(t.data[0], -1.0); // R of pixel 0
        assert_eq!(t.data[1], (10.0f32 / 255.0 - 0.5) / 0.5); // R of pixel 1
        assert_eq!(t.data[2], (128.0f32 / 255.0 - 0.5) / 0.5); // G of pixel 0
        assert_eq!(t.data[4], 1.0); // B of pixel 0
    }

    #[test]
    fn fit_and_pad_centres_and_rounds_up() {
        // 37x61 into 896: scale 896/61 = 14.688..., width ceil(543.47) = 544, offset 176
        let img = RgbImage::filled(37, 61, [200, 100, 50]);
        let out = fit_and_pad(&img, 896, 896, Filter::Bilinear, [0, 0, 0]);
        assert_eq!((out.width, out.height), (896, 896));
        assert_eq!(out.pixel(175, 400), [0, 0, 0]);
        assert_eq!(out.pixel(176, 400), [200, 100, 50]);
        assert_eq!(out.pixel(176 + 543, 400), [200, 100, 50]);
        assert_eq!(out.pixel(176 + 544, 400), [0, 0, 0]);
        assert_eq!(out.pixel(400, 0), [200, 100, 50]);
        assert_eq!(out.pixel(400, 895), [200, 100, 50]);
    }

    #[test]
    fn fit_and_pad_keeps_a_target_sized_image() {
        let img = RgbImage::filled(8, 8, [1, 2, 3]);
        assert_eq!(fit_and_pad(&img, 8, 8, Filter::Bicubic, [9, 9, 9]), img);
    }
}
