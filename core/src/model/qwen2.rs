//! Qwen2 / Qwen2.5: the Llama block with NeoX RoPE and biases on the Q, K and V projections
//! (every block must have them), and usually a separate output matrix.

use super::common::Loader;
use super::llama::{Llama, Variant};
use super::ModelError;

/// Loads a `qwen2` model.
pub fn load(l: &mut Loader) -> Result<Llama, ModelError> {
    Llama::load(l, Variant::Qwen2)
}
