//! Decoding image bytes (PNG, JPEG, WebP, GIF first frame) into 8-bit RGB, with the EXIF
//! orientation applied, through the `image` crate.
//!
//! The size is read from the header and checked before any pixel is decoded, so a
//! decompression bomb (a 30000x30000 PNG of a few KB) is refused without allocating its
//! pixels; the decoder's own allocation limit is set too.

use std::io::Cursor;

use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};

/// An 8-bit RGB image, rows top to bottom, `data.len() == width * height * 3`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RgbImage {
    pub width: u32,
    pub height: u32,
    pub data: Vec<u8>,
}

impl RgbImage {
    /// A `width` x `height` image filled with one colour.
    pub fn filled(width: u32, height: u32, rgb: [u8; 3]) -> Self {
        let n = width as usize * height as usize;
        let mut data = Vec::with_capacity(n * 3);
        for _ in 0..n {
            data.extend_from_slice(&rgb);
        }
        RgbImage {
            width,
            height,
            data,
        }
    }

    /// The pixel at (x, y).
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let i = (y as usize * self.width as usize + x as usize) * 3;
        [self.data[i], self.data[i + 1], self.data[i + 2]]
    }
}

/// Bounds on what [`decode_image`] accepts.
#[derive(Clone, Debug)]
pub struct DecodeLimits {
    /// Largest width x height accepted, checked from the header before decoding.
    pub max_pixels: u64,
    /// Largest allocation the decoder may make (pixels included).
    pub max_alloc_bytes: u64,
}

impl Default for DecodeLimits {
    /// 64 megapixels (an 8192x8192 image; large phone photos are 50 MP) and 512 MiB, the
    /// `image` crate's own default allocation bound.
    fn default() -> Self {
        DecodeLimits {
            max_pixels: 64 * 1024 * 1024,
            max_alloc_bytes: 512 * 1024 * 1024,
        }
    }
}

/// Why an image could not be decoded. Every case is the caller's input: a server answers 400.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ImageError {
    #[error("empty image data")]
    Empty,
    #[error("unrecognized image data (PNG, JPEG, WebP and GIF are supported)")]
    UnknownFormat,
    #[error("{0} images are not supported (PNG, JPEG, WebP and GIF are)")]
    Unsupported(String),
    #[error("image is {width}x{height}, over the limit of {max_pixels} pixels")]
    TooLarge {
        width: u32,
        height: u32,
        max_pixels: u64,
    },
    #[error("corrupt image: {0}")]
    Corrupt(String),
}

/// The formats decoded; everything else `image` might know is refused up front.
fn supported(format: ImageFormat) -> bool {
    matches!(
        format,
        ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::WebP | ImageFormat::Gif
    )
}

fn corrupt(e: image::ImageError) -> ImageError {
    match e {
        image::ImageError::Limits(l) => {
            ImageError::Corrupt(format!("over the decoder's limits: {l}"))
        }
        other => ImageError::Corrupt(other.to_string()),
    }
}

/// The stored width and height of an image, read from its header and checked against
/// `limits` (format, size) without decoding any pixel: what a caller needs to count an
/// image's prompt tokens and to refuse a decompression bomb before doing any work. The
/// EXIF orientation is not applied (a quarter turn swaps the two).
pub fn probe_image(bytes: &[u8], limits: &DecodeLimits) -> Result<(u32, u32), ImageError> {
    let decoder = open(bytes, limits)?;
    checked_size(&decoder, limits)
}

/// A decoder for `bytes` of a supported format, with the allocation limit set.
fn open<'a>(
    bytes: &'a [u8],
    limits: &DecodeLimits,
) -> Result<impl ImageDecoder + use<'a>, ImageError> {
    if bytes.is_empty() {
        return Err(ImageError::Empty);
    }
    let format = image::guess_format(bytes).map_err(|_| ImageError::UnknownFormat)?;
    if !supported(format) {
        return Err(ImageError::Unsupported(
            format
                .extensions_str()
                .first()
                .copied()
                .unwrap_or("this")
                .to_uppercase(),
        ));
    }
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    let mut decoder_limits = Limits::default();
    decoder_limits.max_alloc = Some(limits.max_alloc_bytes);
    reader.limits(decoder_limits);
    reader.into_decoder().map_err(corrupt)
}

/// The decoder's size, refused when empty or over `limits.max_pixels`.
fn checked_size(
    decoder: &impl ImageDecoder,
    limits: &DecodeLimits,
) -> Result<(u32, u32), ImageError> {
    let (width, height) = decoder.dimensions();
    if width == 0 || height == 0 {
        return Err(ImageError::Corrupt(format!("image is {width}x{height}")));
    }
    if u64::from(width) * u64::from(height) > limits.max_pixels {
        return Err(ImageError::TooLarge {
            width,
            height,
            max_pixels: limits.max_pixels,
        });
    }
    Ok((width, height))
}

/// Decodes `bytes` to RGB: the first frame of an animation, the EXIF orientation applied,
/// alpha dropped (not composited), grey expanded to three channels, 16-bit samples reduced
/// to 8 bits.
pub fn decode_image(bytes: &[u8], limits: &DecodeLimits) -> Result<RgbImage, ImageError> {
    let mut decoder = open(bytes, limits)?;
    checked_size(&decoder, limits)?;
    let orientation = decoder.orientation().map_err(corrupt)?;
    let mut img = DynamicImage::from_decoder(decoder).map_err(corrupt)?;
    img.apply_orientation(orientation);
    let rgb = img.into_rgb8();
    Ok(RgbImage {
        width: rgb.width(),
        height: rgb.height(),
        data: rgb.into_raw(),
    })
}
