//! Image input for vision models: decoding image bytes ([`decode`]), resizing as the
//! reference implementation does ([`resize`]) and each family's preprocessing into the
//! encoder's pixel tensor ([`preprocess`]). The vision encoders themselves are model files
//! (issue 34); this module stops at their input.

pub mod decode;
pub mod preprocess;
pub mod resize;

pub use decode::{decode_image, probe_image, DecodeLimits, ImageError, RgbImage};
pub use preprocess::{
    fit_and_pad, gemma3, idefics3, idefics3_grid, idefics3_tiles, normalize, qwen2vl, qwen2vl_size,
    PixelTensor, Tiles,
};
pub use resize::{resize, Filter};
