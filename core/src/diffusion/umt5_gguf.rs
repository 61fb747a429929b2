//! Wan's UMT5 text encoder from a GGUF file in llama.cpp's `t5encoder` layout (what
//! `weft convert` writes as `<stem>-umt5.gguf`, and city96's umt5-xxl-encoder-gguf files):
//! the config from the metadata and the shapes, the weights by the llama.cpp names
//! ([`umt5_gguf_name`]) widened to f32 as the folder loader does, and the tokenizer from the
//! embedded `t5` metadata ([`super::umt5_tokenizer`]).

use std::path::Path;

use super::files::{ModelFileError, Weights};
use super::umt5::{Umt5Config, Umt5Encoder};
use super::umt5_names::{umt5_gguf_name, ARCH};
use crate::gguf::ModelFile;
use crate::tokenizer::Tokenizer;

/// T5's relative-attention maximum distance. GGUF has no key for it: llama.cpp fixes it at
/// 128, which every T5 / UMT5 checkpoint uses (Wan's umt5-xxl included).
const MAX_DISTANCE: usize = 128;

fn bad(path: &Path, message: String) -> ModelFileError {
    ModelFileError::Config {
        path: path.display().to_string(),
        message,
    }
}

/// Opens `path` and checks that it is a T5 / UMT5 encoder GGUF.
pub(super) fn open(path: &Path) -> Result<ModelFile, ModelFileError> {
    let file = ModelFile::open(path).map_err(|e| ModelFileError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    match file.gguf.architecture() {
        Some(ARCH) | Some("t5") => Ok(file),
        other => Err(bad(
            path,
            format!(
                "general.architecture is {:?}, not {ARCH:?} (a UMT5 text encoder GGUF)",
                other.unwrap_or("missing")
            ),
        )),
    }
}

/// The encoder's hyper-parameters from a `t5encoder` GGUF's keys; the vocabulary from the
/// token embedding's rows and the head width from the query projection where the keys lack
/// them.
pub fn config(file: &ModelFile, path: &Path) -> Result<Umt5Config, ModelFileError> {
    let g = &file.gguf;
    let arch = g.architecture().unwrap_or(ARCH).to_string();
    let int = |key: &str| -> Result<usize, ModelFileError> {
        g.get_u64(&format!("{arch}.{key}"))
            .filter(|&n| n > 0)
            .map(|n| n as usize)
            .ok_or_else(|| bad(path, format!("{arch}.{key} is missing or not positive")))
    };
    let rows = |name: &str| -> Result<usize, ModelFileError> {
        let t = g
            .tensor(name)
            .ok_or_else(|| bad(path, format!("tensor {name} is missing")))?;
        Ok(*t.dims.last().unwrap_or(&0) as usize)
    };
    let num_heads = int("attention.head_count")?;
    let d_kv = match int("attention.key_length") {
        Ok(k) => k,
        Err(_) => rows("enc.blk.0.attn_q.weight")? / num_heads,
    };
    let eps = g
        .get_f64(&format!("{arch}.attention.layer_norm_rms_epsilon"))
        .or_else(|| g.get_f64(&format!("{arch}.attention.layer_norm_epsilon")))
        .unwrap_or(1e-6);
    let num_buckets = int("attention.relative_buckets_count")?;
    if num_buckets < 4 || MAX_DISTANCE <= num_buckets / 4 {
        return Err(bad(
            path,
            format!("{num_buckets} relative-attention buckets is not a T5 bucketing"),
        ));
    }
    Ok(Umt5Config {
        vocab_size: rows("token_embd.weight")?,
        d_model: int("embedding_length")?,
        d_kv,
        d_ff: int("feed_forward_length")?,
        num_heads,
        num_layers: int("block_count")?,
        num_buckets,
        max_distance: MAX_DISTANCE,
        eps: eps as f32,
    })
}

impl Umt5Encoder {
    /// Loads a UMT5 encoder GGUF (`t5encoder`; any GGML type, widened to f32).
    pub fn load_gguf(path: &Path) -> Result<Self, ModelFileError> {
        let file = open(path)?;
        Self::from_gguf(&file, path)
    }

    /// The encoder from an opened `t5encoder` GGUF (`path` names it in errors).
    pub fn from_gguf(file: &ModelFile, path: &Path) -> Result<Self, ModelFileError> {
        let config = config(file, path)?;
        let rename = |hf: &str| umt5_gguf_name(hf);
        Self::from_weights(config, &Weights::renamed(file, path, &rename))
    }
}

/// The UMT5 encoder and its tokenizer from one GGUF file.
pub fn load_with_tokenizer(path: &Path) -> Result<(Umt5Encoder, Tokenizer), ModelFileError> {
    let file = open(path)?;
    let tokenizer = super::umt5_tokenizer::from_gguf(&file.gguf)
        .map_err(|e| bad(path, format!("embedded tokenizer: {e}")))?;
    Ok((Umt5Encoder::from_gguf(&file, path)?, tokenizer))
}
