//! Qwen2 / Qwen2.5: the Llama block with NeoX RoPE and biases on the Q, K and V projections
//! (every block must have them), and usually a separate output matrix.

use super::common::Loader;
use super::llama::{Llama, Variant};
use super::ModelError;

/// Loads a `qwen2` model.
pub fn load(l: &mut Loader) -> Result<Llama, ModelError> {
    Llama::load(l, Variant::Qwen2)
}

/// Loads a `qwen2vl` model (the text half of Qwen2-VL / Qwen2.5-VL): Qwen2 with multimodal
/// rotary positions (M-RoPE). `rope.dimension_sections` splits each head's rotated pairs
/// into sections turned by a row's temporal, height and width positions (and a fourth,
/// unused by these models); text rows have all three equal, which is plain NeoX RoPE.
pub fn load_vl(l: &mut Loader) -> Result<Llama, ModelError> {
    let key = format!("{}.rope.dimension_sections", l.arch());
    let bad = |message: String| ModelError::Metadata {
        key: key.clone(),
        message,
    };
    let items = l
        .file
        .gguf
        .get_array(&key)
        .ok_or_else(|| bad("missing or not an array".into()))?;
    let vals: Vec<u32> = items
        .iter()
        .map(|v| v.as_u64().and_then(|v| u32::try_from(v).ok()))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("expected non-negative integers".into()))?;
    let mut sections = [0u32; 4];
    if vals.is_empty() || vals.len() > 4 || vals.iter().all(|&v| v == 0) {
        return Err(bad(format!(
            "expected 1 to 4 section sizes, not all zero, found {vals:?}"
        )));
    }
    sections[..vals.len()].copy_from_slice(&vals);
    let mut model = Llama::load(l, Variant::Qwen2)?;
    model.set_rope_sections(sections)?;
    Ok(model)
}
