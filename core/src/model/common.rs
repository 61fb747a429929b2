//! What the families share: reading hyper-parameters and loading weights with progress.

use std::sync::Arc;

use super::ModelError;
use crate::backend::{Backend, Weight};
use crate::gguf::ModelFile;

/// Shape facts about a loaded model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInfo {
    /// `general.architecture`.
    pub architecture: String,
    /// Vocabulary size (rows of the output projection).
    pub n_vocab: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Embedding width.
    pub n_embd: usize,
    /// Context length the model was trained for.
    pub n_ctx_train: usize,
}

/// The weights every transformer block of our families has: attention norm, the four
/// attention projections, feed-forward norm and the gated feed-forward's three matrices.
#[derive(Clone, Copy)]
pub struct BlockWeights {
    pub attn_norm: Weight,
    pub wq: Weight,
    pub wk: Weight,
    pub wv: Weight,
    pub wo: Weight,
    pub ffn_norm: Weight,
    pub gate: Weight,
    pub up: Weight,
    pub down: Weight,
}

impl BlockWeights {
    /// Loads block `i`'s shared weights under their GGUF names.
    pub fn load(l: &mut Loader, i: usize) -> Result<Self, ModelError> {
        Ok(BlockWeights {
            attn_norm: l.layer(i, "attn_norm.weight")?,
            wq: l.layer(i, "attn_q.weight")?,
            wk: l.layer(i, "attn_k.weight")?,
            wv: l.layer(i, "attn_v.weight")?,
            wo: l.layer(i, "attn_output.weight")?,
            ffn_norm: l.layer(i, "ffn_norm.weight")?,
            gate: l.layer(i, "ffn_gate.weight")?,
            up: l.layer(i, "ffn_up.weight")?,
            down: l.layer(i, "ffn_down.weight")?,
        })
    }
}

/// Loads weights and reads metadata of one model file.
pub struct Loader<'a> {
    pub file: &'a Arc<ModelFile>,
    backend: &'a mut dyn Backend,
    progress: &'a mut dyn FnMut(usize, usize),
    done: usize,
    arch: String,
}

impl<'a> Loader<'a> {
    pub fn new(
        file: &'a Arc<ModelFile>,
        backend: &'a mut dyn Backend,
        progress: &'a mut dyn FnMut(usize, usize),
    ) -> Self {
        let arch = file.gguf.architecture().unwrap_or_default().to_string();
        Loader {
            file,
            backend,
            progress,
            done: 0,
            arch,
        }
    }

    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// A required tensor.
    pub fn weight(&mut self, name: &str) -> Result<Weight, ModelError> {
        let w = self.backend.load_weight(self.file, name)?;
        self.done += 1;
        (self.progress)(self.done, self.file.gguf.tensors.len());
        Ok(w)
    }

    /// A tensor that some models of the family have and others do not.
    pub fn optional(&mut self, name: &str) -> Result<Option<Weight>, ModelError> {
        if self.file.gguf.tensor(name).is_none() {
            return Ok(None);
        }
        self.weight(name).map(Some)
    }

    /// A tensor of block `layer`: `blk.<layer>.<name>.weight`.
    pub fn layer(&mut self, layer: usize, name: &str) -> Result<Weight, ModelError> {
        self.weight(&format!("blk.{layer}.{name}"))
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch)
    }

    /// A required integer `<arch>.<suffix>`.
    pub fn usize(&self, suffix: &str) -> Result<usize, ModelError> {
        let key = self.key(suffix);
        match self.file.gguf.get(&key) {
            None => Err(ModelError::Metadata {
                key,
                message: "missing".into(),
            }),
            Some(v) => v
                .as_u64()
                .map(|v| v as usize)
                .ok_or_else(|| ModelError::Metadata {
                    key,
                    message: format!("expected an integer, found {v}"),
                }),
        }
    }

    /// An optional integer `<arch>.<suffix>`.
    pub fn usize_or(&self, suffix: &str, default: usize) -> Result<usize, ModelError> {
        if self.file.gguf.get(&self.key(suffix)).is_none() {
            return Ok(default);
        }
        self.usize(suffix)
    }

    /// An optional float `<arch>.<suffix>`.
    pub fn f32_opt(&self, suffix: &str) -> Result<Option<f32>, ModelError> {
        let key = self.key(suffix);
        match self.file.gguf.get(&key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(|v| Some(v as f32))
                .ok_or_else(|| ModelError::Metadata {
                    key,
                    message: format!("expected a number, found {v}"),
                }),
        }
    }

    /// Attention head counts `(n_head, n_head_kv)`, checked: query heads must be positive
    /// and a whole multiple of key/value heads (grouped-query attention shares each
    /// key/value head among an equal number of query heads).
    pub fn head_counts(&self) -> Result<(usize, usize), ModelError> {
        let n_head = self.usize("attention.head_count")?;
        self.check(n_head > 0, "attention.head_count", "must be positive")?;
        let n_head_kv = self.usize_or("attention.head_count_kv", n_head)?;
        self.check(
            n_head_kv > 0 && n_head.is_multiple_of(n_head_kv),
            "attention.head_count_kv",
            "must divide attention.head_count",
        )?;
        Ok((n_head, n_head_kv))
    }

    /// Fails with a clear message when a hyper-parameter is out of range.
    pub fn check(&self, ok: bool, suffix: &str, message: &str) -> Result<(), ModelError> {
        if ok {
            Ok(())
        } else {
            Err(ModelError::Metadata {
                key: self.key(suffix),
                message: message.into(),
            })
        }
    }
}
