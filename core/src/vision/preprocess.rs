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

/// The encoder input size Qwen2-VL / Qwen2.5-VL use for a `width` x `height` image: each side
/// rounded to a multiple of `align` (patch size x merge size, 28), then scaled, keeping the
/// aspect ratio, so the area lies within `min_pixels ..= max_pixels` (transformers'
/// `smart_resize`; mtmd's limits are 8 and 4096 merged tokens). f32 arithmetic throughout, as
/// in mtmd, so the rounding lands the same way.
pub fn qwen2vl_size(
    width: u32,
    height: u32,
    align: u32,
    min_pixels: u64,
    max_pixels: u64,
) -> (u32, u32) {
    let f = align as f32;
    let round_by = |x: f32| (x / f).round() as u32 * align;
    let ceil_by = |x: f32| (x / f).ceil() as u32 * align;
    let floor_by = |x: f32| (x / f).floor() as u32 * align;
    let (w, h) = (width as f32, height as f32);
    let mut w_bar = round_by(w).max(align);
    let mut h_bar = round_by(h).max(align);
    let area = u64::from(w_bar) * u64::from(h_bar);
    if max_pixels > 0 && area > max_pixels {
        let beta = (h * w / max_pixels as f32).sqrt();
        h_bar = floor_by(h / beta).max(align);
        w_bar = floor_by(w / beta).max(align);
    } else if min_pixels > 0 && area < min_pixels {
        let beta = (min_pixels as f32 / (h * w)).sqrt();
        h_bar = ceil_by(h * beta);
        w_bar = ceil_by(w * beta);
    }
    (w_bar, h_bar)
}

/// Qwen2-VL / Qwen2.5-VL preprocessing as mtmd does it: one encoder input of
/// [`qwen2vl_size`] (`align` = patch size x merge size; token limits in merged tokens), the
/// image fitted into it with bicubic filtering and padded with black, normalized with the
/// mmproj's mean and std (CLIP's). transformers stretches to that size instead.
pub fn qwen2vl(
    img: &RgbImage,
    align: u32,
    min_tokens: u64,
    max_tokens: u64,
    mean: [f32; 3],
    std: [f32; 3],
) -> (RgbImage, PixelTensor) {
    let area = u64::from(align) * u64::from(align);
    let (w, h) = qwen2vl_size(
        img.width,
        img.height,
        align,
        min_tokens * area,
        max_tokens * area,
    );
    let fitted = fit_and_pad(img, w, h, Filter::Bicubic, [0, 0, 0]);
    let tensor = normalize(&fitted, mean, std);
    (fitted, tensor)
}

/// The size [`idefics3_tiles`] first resizes a `width` x `height` image to: its longest side
/// `longest_edge`, the other truncated by the aspect ratio and made even.
pub fn idefics3_size(width: u32, height: u32, longest_edge: u32) -> (u32, u32) {
    let aspect = f64::from(width) / f64::from(height);
    let (mut w, mut h);
    if width >= height {
        w = longest_edge;
        h = ((f64::from(longest_edge) / aspect) as u32).max(1);
        h += h % 2;
    } else {
        h = longest_edge;
        w = ((f64::from(longest_edge) * aspect) as u32).max(1);
        w += w % 2;
    }
    (w, h)
}

/// Tiles across and down for a `width` x `height` image (see [`idefics3_tiles`]).
pub fn idefics3_grid(width: u32, height: u32, longest_edge: u32, tile: u32) -> (u32, u32) {
    let (w, h) = idefics3_size(width, height, longest_edge);
    (w.div_ceil(tile), h.div_ceil(tile))
}

/// An image cut for Idefics3 / SmolVLM: `grid_x` x `grid_y` tiles, row by row, and an
/// overview of the whole image at tile size.
#[derive(Clone, Debug, PartialEq)]
pub struct Tiles {
    pub grid_x: u32,
    pub grid_y: u32,
    pub tiles: Vec<RgbImage>,
    pub overview: RgbImage,
}

fn crop(img: &RgbImage, x: u32, y: u32, w: u32, h: u32) -> RgbImage {
    let mut data = Vec::with_capacity(w as usize * h as usize * 3);
    for row in y..y + h {
        let start = (row as usize * img.width as usize + x as usize) * 3;
        data.extend_from_slice(&img.data[start..start + w as usize * 3]);
    }
    RgbImage {
        width: w,
        height: h,
        data,
    }
}

/// Idefics3 / SmolVLM tiling as mtmd does it for mmprojs that carry a longest edge
/// (`clip.vision.preproc_image_size`, 2048 for SmolVLM; `tile` = the encoder's image size,
/// 512): resize to that longest edge keeping the aspect ratio (other side truncated, then made
/// even), resize again up to whole tiles, cut the tiles row by row, and shrink that image to
/// one tile for the overview. Lanczos throughout.
pub fn idefics3_tiles(img: &RgbImage, longest_edge: u32, tile: u32) -> Tiles {
    let (w, h) = idefics3_size(img.width, img.height, longest_edge);
    let (grid_x, grid_y) = (w.div_ceil(tile), h.div_ceil(tile));
    let resized = resize(img, w, h, Filter::Lanczos);
    let refined = resize(&resized, grid_x * tile, grid_y * tile, Filter::Lanczos);
    let overview = resize(&refined, tile, tile, Filter::Lanczos);
    let mut tiles = Vec::with_capacity((grid_x * grid_y) as usize);
    for gy in 0..grid_y {
        for gx in 0..grid_x {
            tiles.push(crop(&refined, gx * tile, gy * tile, tile, tile));
        }
    }
    Tiles {
        grid_x,
        grid_y,
        tiles,
        overview,
    }
}

/// The encoder inputs of [`idefics3_tiles`] in mtmd's order (tiles row by row, then the
/// overview), normalized.
pub fn idefics3(
    img: &RgbImage,
    longest_edge: u32,
    tile: u32,
    mean: [f32; 3],
    std: [f32; 3],
) -> (Tiles, Vec<PixelTensor>) {
    let t = idefics3_tiles(img, longest_edge, tile);
    let tensors = t
        .tiles
        .iter()
        .chain(std::iter::once(&t.overview))
        .map(|i| normalize(i, mean, std))
        .collect();
    (t, tensors)
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
    fn qwen2vl_size_rounds_and_scales_into_the_token_limits() {
        let (min, max) = (8 * 784, 4096 * 784);
        assert_eq!(qwen2vl_size(640, 480, 28, min, max), (644, 476));
        assert_eq!(qwen2vl_size(224, 224, 28, min, max), (224, 224));
        // 28x56 would be 2 tokens: scaled up to reach 8
        assert_eq!(qwen2vl_size(37, 61, 28, min, max), (84, 112));
        // 4000x3000 = 15306 tokens: scaled down under 4096
        let (w, h) = qwen2vl_size(4000, 3000, 28, min, max);
        assert!(u64::from(w) * u64::from(h) <= max && w % 28 == 0 && h % 28 == 0);
    }

    #[test]
    fn idefics3_tiles_cover_the_longest_edge() {
        let t = idefics3_tiles(&RgbImage::filled(640, 480, [5, 6, 7]), 2048, 512);
        assert_eq!((t.grid_x, t.grid_y, t.tiles.len()), (4, 3, 12));
        assert_eq!((t.overview.width, t.overview.height), (512, 512));
        let t = idefics3_tiles(&RgbImage::filled(37, 61, [5, 6, 7]), 2048, 512);
        // 2048 x 37/61 = 1242.2 -> 1242 (even) -> 3 tiles across, 4 down
        assert_eq!((t.grid_x, t.grid_y), (3, 4));
        assert!(t
            .tiles
            .iter()
            .all(|i| i.data.chunks(3).all(|p| p == [5, 6, 7])));
    }

    #[test]
    fn fit_and_pad_keeps_a_target_sized_image() {
        let img = RgbImage::filled(8, 8, [1, 2, 3]);
        assert_eq!(fit_and_pad(&img, 8, 8, Filter::Bicubic, [9, 9, 9]), img);
    }
}
