//! Uploaded media into images for a vision model: sampled video frames ([`video`]) and rendered
//! PDF pages ([`pdf`]). Pure library: no HTTP, nothing of the server; every decoder is built from
//! crates.io sources (no system ffmpeg, pdfium or mupdf).
//!
//! Bad input is an [`Error`], never a panic: sizes are checked from headers before any decoding,
//! and the parsers run under `catch_unwind` so a bug in one of them is an error too.

mod error;
pub mod pdf;
pub mod video;

pub use error::Error;
