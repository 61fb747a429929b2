//! Hugging Face model folders (native builds): `config.json`, `model.safetensors` and
//! `tokenizer.json`, with sentence-transformers' `modules.json`, `1_Pooling/config.json` and
//! `sentence_bert_config.json` deciding pooling, normalisation and the longest input.
//!
//! The safetensors file is memory-mapped and described by a GGUF header in llama.cpp's names
//! and keys (`general.architecture = bert`, `bert.*`, `tokenizer.ggml.*` from tokenizer.json),
//! so the model loads through the same path as a GGUF file, and [`HfModel::to_gguf`] writes the
//! same model as a GGUF file llama.cpp reads.

mod config;
pub mod decoder;
pub mod mmproj;
mod weights;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use config::{BertConfig, SentenceConfig};
pub use weights::gguf_name;
pub(crate) use weights::map_renamed;

use crate::gguf::{write_gguf, ModelFile, TensorToWrite, Value};
use crate::model::bert::pool_mode_to_gguf;
use crate::tokenizer::{Tokenizer, TokenizerError};

/// Why a model folder could not be opened. Each message is one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum HfError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: {message}")]
    Config { path: String, message: String },
    #[error("{path}: model type {found:?} is not supported (supported: bert, i.e. BERT, MiniLM, BGE, E5, GTE)")]
    Unsupported { path: String, found: String },
    #[error("{path}: not a valid safetensors file: {message}")]
    Safetensors { path: String, message: String },
    #[error("{path}: {source}")]
    Tokenizer {
        path: String,
        source: TokenizerError,
    },
}

impl HfError {
    fn io(path: &Path, e: std::io::Error) -> Self {
        let message = match e.kind() {
            std::io::ErrorKind::NotFound => "not found".to_string(),
            _ => e.to_string(),
        };
        HfError::Io {
            path: path.display().to_string(),
            message,
        }
    }
}

/// Whether `path` is a folder with a `config.json` (a Hugging Face model folder).
pub fn is_model_folder(path: &Path) -> bool {
    path.is_dir() && path.join("config.json").is_file()
}

/// An opened model folder.
pub struct HfModel {
    pub dir: PathBuf,
    /// The folder's name.
    pub name: String,
    pub config: BertConfig,
    pub sentence: SentenceConfig,
    /// `model.safetensors`, mapped, under a GGUF header (see the module docs).
    pub file: Arc<ModelFile>,
    /// From `tokenizer.json`.
    pub tokenizer: Tokenizer,
}

impl HfModel {
    /// Opens a folder: reads the configs and the tokenizer, maps the weights.
    pub fn open(dir: &Path) -> Result<Self, HfError> {
        if !dir.is_dir() {
            return Err(HfError::Io {
                path: dir.display().to_string(),
                message: "is not a model folder".into(),
            });
        }
        let config = BertConfig::read(&dir.join("config.json"))?;
        let sentence = SentenceConfig::read(dir)?;
        let tok_path = dir.join("tokenizer.json");
        let tok_bytes = std::fs::read(&tok_path).map_err(|e| HfError::io(&tok_path, e))?;
        let tok_err = |source| HfError::Tokenizer {
            path: tok_path.display().to_string(),
            source,
        };
        let tokenizer = Tokenizer::from_tokenizer_json(&tok_bytes).map_err(tok_err)?;
        let vocab = wordpiece_vocab(&tok_bytes).map_err(tok_err)?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into());
        let max_tokens = max_tokens(&config, &sentence);
        let metadata = metadata(&name, &config, &sentence, max_tokens, vocab);
        let file = weights::open(&dir.join("model.safetensors"), metadata)?;
        Ok(HfModel {
            dir: dir.to_path_buf(),
            name,
            config,
            sentence,
            file: Arc::new(file),
            tokenizer,
        })
    }

    /// The longest input in tokens (sentence-transformers' `max_seq_length`, else the learned
    /// positions).
    pub fn max_tokens(&self) -> usize {
        max_tokens(&self.config, &self.sentence)
    }

    /// The same model as a GGUF file in llama.cpp's layout (tensors as stored in the
    /// safetensors file).
    pub fn to_gguf(&self) -> Vec<u8> {
        let g = &self.file.gguf;
        let meta: Vec<(&str, Value)> = g
            .metadata
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        let tensors: Vec<TensorToWrite> = g
            .tensors
            .iter()
            .map(|t| TensorToWrite {
                name: &t.name,
                dims: &t.dims,
                ty: t.ty,
                data: self.file.tensor_data(t),
            })
            .collect();
        write_gguf(&meta, &tensors, 32)
    }
}

fn max_tokens(c: &BertConfig, s: &SentenceConfig) -> usize {
    s.max_seq_length
        .unwrap_or(c.max_position_embeddings)
        .min(c.max_position_embeddings)
}

/// The vocabulary of a WordPiece `tokenizer.json` in llama.cpp's GGUF convention: pieces that
/// start a word carry U+2581, continuations lose their `##`, control tokens (special added
/// tokens: `[CLS]`, `[SEP]` ...) stay as they are; with token types (3 control, else 1 normal).
struct Vocab {
    tokens: Vec<String>,
    types: Vec<i32>,
}

fn wordpiece_vocab(bytes: &[u8]) -> Result<Vocab, TokenizerError> {
    let bad = |m: &str| TokenizerError::TokenizerJson(m.to_string());
    let json: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| bad(&e.to_string()))?;
    let model = &json["model"];
    if model["type"].as_str() != Some("WordPiece") {
        return Err(bad("a BERT encoder needs a WordPiece tokenizer"));
    }
    let map = model["vocab"]
        .as_object()
        .ok_or_else(|| bad("model.vocab is missing"))?;
    let mut pieces = vec![String::new(); map.len()];
    for (piece, id) in map {
        let id = id.as_u64().filter(|&i| (i as usize) < pieces.len());
        let id = id.ok_or_else(|| bad("model.vocab ids are not 0..n"))? as usize;
        pieces[id] = piece.clone();
    }
    let mut types = vec![1i32; pieces.len()];
    for t in json["added_tokens"].as_array().into_iter().flatten() {
        let (Some(id), true) = (t["id"].as_u64(), t["special"].as_bool() == Some(true)) else {
            continue;
        };
        if let Some(ty) = types.get_mut(id as usize) {
            *ty = 3;
        }
    }
    let tokens = pieces
        .into_iter()
        .zip(&types)
        .map(|(piece, &ty)| {
            if ty == 3 {
                piece
            } else if let Some(rest) = piece.strip_prefix("##") {
                rest.to_string()
            } else {
                format!("\u{2581}{piece}")
            }
        })
        .collect();
    Ok(Vocab { tokens, types })
}

/// The GGUF metadata llama.cpp's converter writes for a BERT model.
fn metadata(
    name: &str,
    c: &BertConfig,
    s: &SentenceConfig,
    max_tokens: usize,
    vocab: Vocab,
) -> Vec<(String, Value)> {
    let id_of = |text: &str| {
        vocab
            .tokens
            .iter()
            .position(|t| t == text)
            .map(|i| i as u32)
    };
    let mut m: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String("bert".into())),
        ("general.name".into(), Value::String(name.into())),
        (
            "bert.context_length".into(),
            Value::U32(c.max_position_embeddings as u32),
        ),
        (
            "bert.embedding_length".into(),
            Value::U32(c.hidden_size as u32),
        ),
        (
            "bert.feed_forward_length".into(),
            Value::U32(c.intermediate_size as u32),
        ),
        (
            "bert.block_count".into(),
            Value::U32(c.num_hidden_layers as u32),
        ),
        (
            "bert.attention.head_count".into(),
            Value::U32(c.num_attention_heads as u32),
        ),
        (
            "bert.attention.layer_norm_epsilon".into(),
            Value::F32(c.layer_norm_eps.unwrap_or(1e-12) as f32),
        ),
        ("bert.attention.causal".into(), Value::Bool(false)),
        (
            "bert.pooling_type".into(),
            Value::U32(pool_mode_to_gguf(s.pooling)),
        ),
        // Not llama.cpp keys: what sentence-transformers' files say beyond pooling.
        ("weft.embedding.normalize".into(), Value::Bool(s.normalize)),
        (
            "weft.embedding.max_tokens".into(),
            Value::U32(max_tokens as u32),
        ),
        ("tokenizer.ggml.model".into(), Value::String("bert".into())),
        (
            "tokenizer.ggml.token_type_count".into(),
            Value::U32(c.type_vocab_size.unwrap_or(2) as u32),
        ),
    ];
    // As llama.cpp's converter: [CLS] is the BOS and [SEP] the EOS, both added.
    for (key, text) in [
        ("tokenizer.ggml.bos_token_id", "[CLS]"),
        ("tokenizer.ggml.eos_token_id", "[SEP]"),
        ("tokenizer.ggml.unknown_token_id", "[UNK]"),
        ("tokenizer.ggml.seperator_token_id", "[SEP]"),
        ("tokenizer.ggml.padding_token_id", "[PAD]"),
        ("tokenizer.ggml.mask_token_id", "[MASK]"),
    ] {
        if let Some(id) = id_of(text) {
            m.push((key.into(), Value::U32(id)));
        }
    }
    for (key, on) in [
        ("tokenizer.ggml.add_bos_token", true),
        ("tokenizer.ggml.add_eos_token", true),
        ("tokenizer.ggml.add_sep_token", false),
    ] {
        m.push((key.into(), Value::Bool(on)));
    }
    m.push((
        "tokenizer.ggml.tokens".into(),
        Value::Array(vocab.tokens.into_iter().map(Value::String).collect()),
    ));
    m.push((
        "tokenizer.ggml.token_type".into(),
        Value::Array(vocab.types.into_iter().map(Value::I32).collect()),
    ));
    m
}
