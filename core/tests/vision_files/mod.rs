//! Reading the vision reference kit's files (tests/data/vision) and comparing embeddings:
//! shared by the vision tests. Each test binary uses some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use weft_core::gguf::ModelFile;
use weft_core::model::vision::Mmproj;

/// A raw little-endian f32 file (embeddings).
pub fn read_f32(path: &Path) -> Vec<f32> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// An 8-bit RGB PNG as `(width, height, pixels)`, 3 bytes a pixel row by row.
pub fn read_png(path: &Path) -> (usize, usize, Vec<u8>) {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut dec = png::Decoder::new(std::io::BufReader::new(f))
        .read_info()
        .unwrap();
    let mut buf = vec![0; dec.output_buffer_size().unwrap()];
    let info = dec.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb, "{}", path.display());
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    buf.truncate(info.buffer_size());
    (info.width as usize, info.height as usize, buf)
}

/// A file of the vision reference kit, `rel` under tests/data/vision.
pub fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/vision")
        .join(rel)
}

/// The mmproj file at `rel` under tests/data/vision, read.
pub fn mmproj(rel: &str) -> Mmproj {
    let file = ModelFile::open(data(rel)).unwrap();
    Mmproj::read(Arc::new(file)).unwrap()
}

/// mtmd's encoder input: planar `[3][h][w]`, `(v / 255 - mean) / std` in f32.
pub fn normalise(w: usize, h: usize, rgb: &[u8], mean: [f32; 3], std: [f32; 3]) -> Vec<f32> {
    let mut out = vec![0f32; 3 * w * h];
    for (i, px) in rgb.chunks_exact(3).enumerate() {
        for c in 0..3 {
            out[c * w * h + i] = (px[c] as f32 / 255.0 - mean[c]) / std[c];
        }
    }
    out
}

/// (cosine, max |a - b|) over the whole tensors.
pub fn compare(a: &[f32], b: &[f32]) -> (f64, f64) {
    assert_eq!(a.len(), b.len());
    let (mut dot, mut na, mut nb, mut max) = (0f64, 0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        dot += x * y;
        na += x * x;
        nb += y * y;
        max = max.max((x - y).abs());
    }
    (dot / (na.sqrt() * nb.sqrt()), max)
}
