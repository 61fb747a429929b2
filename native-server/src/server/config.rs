//! The server's settings from the `weft serve` command line.

use super::common::sampling::{Precedence, SamplingFields};

/// Settings from the `weft serve` command line.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub backend: String,
    pub n_ctx: usize,
    pub parallel: usize,
    /// Default and cap of generated tokens per request.
    pub max_tokens: usize,
    pub queue: usize,
    /// Largest request body accepted, in bytes.
    pub body_limit: usize,
    pub sampling: SamplingFields,
    pub precedence: Precedence,
    /// Where uploads go and how large they may be.
    pub uploads: super::uploads::UploadConfig,
    /// Host names and origins the server answers (`--allowed-host`, `--cors-origin`).
    pub site: super::site::SiteConfig,
    /// Per-request bounds on images (`--max-images`, `--max-image-bytes`,
    /// `--max-image-pixels`).
    pub images: super::common::images::ImageLimits,
}
