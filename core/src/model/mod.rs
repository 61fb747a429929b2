//! Model families, built from GGUF metadata. Each family records the ops of one forward step
//! into a backend [`Graph`]; the backend executes it.

pub mod bert;
mod common;
mod gemma3;
mod llama;
mod qwen2;
pub mod vision;

use std::sync::Arc;

pub use common::ModelInfo;

use crate::backend::{Backend, BackendError, Graph, KvCacheId, KvLayerSpec, TensorId};
use crate::gguf::ModelFile;

/// Architectures (`general.architecture`) this crate can run.
pub const SUPPORTED_ARCHITECTURES: &[&str] = &["gemma3", "llama", "qwen2", "qwen2vl"];

/// Encoder architectures: embedding models, loaded with [`load_encoder`].
pub const ENCODER_ARCHITECTURES: &[&str] = &["bert"];

/// What a family's models are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Decoders: they continue text (completion, and chat with a template).
    Generate,
    /// Encoders: they turn text into an embedding vector.
    Embed,
}

/// The role of each architecture in [`SUPPORTED_ARCHITECTURES`] and [`ENCODER_ARCHITECTURES`].
pub const FAMILY_ROLES: &[(&str, Role)] = &[
    ("bert", Role::Embed),
    ("gemma3", Role::Generate),
    ("llama", Role::Generate),
    ("qwen2", Role::Generate),
    ("qwen2vl", Role::Generate),
];

/// The role of an architecture's models; None for architectures this crate cannot run.
pub fn role(architecture: &str) -> Option<Role> {
    FAMILY_ROLES
        .iter()
        .find(|(a, _)| *a == architecture)
        .map(|&(_, r)| r)
}

/// Why a model could not be built.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ModelError {
    #[error("architecture {0:?} is not supported (supported: {list})", list = SUPPORTED_ARCHITECTURES.join(", "))]
    UnsupportedArchitecture(String),
    #[error("{0} is an embedding model: it does not generate text")]
    EmbeddingOnly(String),
    #[error("architecture {0:?} is not an embedding encoder (supported: {list})", list = ENCODER_ARCHITECTURES.join(", "))]
    NotAnEncoder(String),
    #[error("the model file has no general.architecture")]
    NoArchitecture,
    #[error("metadata {key}: {message}")]
    Metadata { key: String, message: String },
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// A loaded model: records forward steps for the backend that holds its weights.
pub trait Model: Send + Sync {
    /// Shape facts (vocabulary, layers, trained context).
    fn info(&self) -> &ModelInfo;

    /// The cache each layer needs for contexts of `n_ctx` tokens and steps of up to
    /// `max_batch` rows per sequence.
    fn kv_layers(&self, n_ctx: usize, max_batch: usize) -> Vec<KvLayerSpec>;

    /// Records one forward step of `graph.n_tokens` rows and returns the logits of the rows
    /// listed in `output_rows` (a `output_rows.len() × n_vocab` tensor).
    fn build(&self, graph: &mut Graph, kv: KvCacheId, output_rows: &[u32]) -> TensorId;

    /// Records the same step but returns the final-normed hidden states of `output_rows`
    /// (`output_rows.len() × n_embd`, before the output projection): what embeddings of a
    /// decoder are pooled from.
    fn build_hidden(&self, graph: &mut Graph, kv: KvCacheId, output_rows: &[u32]) -> TensorId;

    /// Sections of multimodal rotary positions (Qwen2-VL's M-RoPE: rotated pairs per
    /// temporal / height / width component), if the model uses them; it then reads
    /// [`Graph::rope_positions`] when a step sets them.
    fn rope_sections(&self) -> Option<[u32; 4]> {
        None
    }
}

/// Loads the model in `file` into `backend`. `progress(done, total)` is called as tensors load.
pub fn load(
    file: &Arc<ModelFile>,
    backend: &mut dyn Backend,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Box<dyn Model>, ModelError> {
    let arch = file
        .gguf
        .architecture()
        .ok_or(ModelError::NoArchitecture)?
        .to_string();
    let mut loader = common::Loader::new(file, backend, progress);
    Ok(match arch.as_str() {
        "llama" => Box::new(llama::Llama::load(&mut loader, llama::Variant::Llama)?),
        "qwen2" => Box::new(qwen2::load(&mut loader)?),
        "qwen2vl" => Box::new(qwen2::load_vl(&mut loader)?),
        "gemma3" => Box::new(gemma3::Gemma3::load(&mut loader)?),
        a if ENCODER_ARCHITECTURES.contains(&a) => return Err(ModelError::EmbeddingOnly(arch)),
        _ => return Err(ModelError::UnsupportedArchitecture(arch)),
    })
}

/// Loads the encoder (embedding model) in `file` into `backend`.
pub fn load_encoder(
    file: &Arc<ModelFile>,
    backend: &mut dyn Backend,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<bert::Bert, ModelError> {
    let arch = file
        .gguf
        .architecture()
        .ok_or(ModelError::NoArchitecture)?
        .to_string();
    let mut loader = common::Loader::new(file, backend, progress);
    match arch.as_str() {
        "bert" => bert::Bert::load(&mut loader),
        _ => Err(ModelError::NotAnEncoder(arch)),
    }
}

#[cfg(test)]
mod tests {
    use super::Role;

    #[test]
    fn every_supported_architecture_has_a_role() {
        let mut with_role: Vec<&str> = super::FAMILY_ROLES.iter().map(|(a, _)| *a).collect();
        with_role.sort_unstable();
        let mut supported = super::SUPPORTED_ARCHITECTURES.to_vec();
        supported.extend_from_slice(super::ENCODER_ARCHITECTURES);
        supported.sort_unstable();
        assert_eq!(with_role, supported);
        for a in super::ENCODER_ARCHITECTURES {
            assert_eq!(super::role(a), Some(Role::Embed));
        }
    }
}
