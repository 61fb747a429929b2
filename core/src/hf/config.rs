//! The JSON files of a Hugging Face model folder that decide how an encoder runs: the
//! transformer's `config.json` and sentence-transformers' `modules.json`,
//! `1_Pooling/config.json` and `sentence_bert_config.json`.

use std::path::Path;

use serde::Deserialize;

use super::HfError;
use crate::backend::PoolMode;

/// The fields of a BERT-style `config.json` the encoder needs.
#[derive(Clone, Debug, Deserialize)]
pub struct BertConfig {
    pub model_type: Option<String>,
    #[serde(default)]
    pub architectures: Vec<String>,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub type_vocab_size: Option<usize>,
    #[serde(default)]
    pub layer_norm_eps: Option<f64>,
    #[serde(default)]
    pub hidden_act: Option<String>,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    pub vocab_size: usize,
}

/// `model_type`s (and `architectures`) read as BERT encoders.
const BERT_TYPES: &[&str] = &["bert"];

/// Reads and parses one JSON file of the folder.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, HfError> {
    let bytes = std::fs::read(path).map_err(|e| HfError::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| HfError::Config {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

impl BertConfig {
    /// Reads `config.json` and checks that it describes an encoder this crate runs.
    pub fn read(path: &Path) -> Result<Self, HfError> {
        // Architecture first, so an unsupported model says so rather than missing a field.
        let raw: serde_json::Value = read_json(path)?;
        let model_type = raw.get("model_type").and_then(|v| v.as_str()).unwrap_or("");
        let archs: Vec<&str> = raw
            .get("architectures")
            .and_then(|a| a.as_array())
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let bert = BERT_TYPES.contains(&model_type)
            || (model_type.is_empty() && archs.iter().any(|a| a.starts_with("Bert")));
        if !bert {
            let found = if model_type.is_empty() {
                archs.join(", ")
            } else {
                model_type.to_string()
            };
            return Err(HfError::Unsupported {
                path: path.display().to_string(),
                found,
            });
        }
        let c: BertConfig = serde_json::from_value(raw).map_err(|e| HfError::Config {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let bad = |message: String| HfError::Config {
            path: path.display().to_string(),
            message,
        };
        if let Some(act) = c.hidden_act.as_deref().filter(|a| *a != "gelu") {
            return Err(bad(format!(
                "hidden_act {act:?} is not supported (BERT encoders use \"gelu\")"
            )));
        }
        if let Some(p) = c
            .position_embedding_type
            .as_deref()
            .filter(|p| *p != "absolute")
        {
            return Err(bad(format!(
                "position_embedding_type {p:?} is not supported (only \"absolute\")"
            )));
        }
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            return Err(bad(
                "num_attention_heads must divide hidden_size".to_string()
            ));
        }
        Ok(c)
    }
}

/// How sentence-transformers turns the transformer's output into one vector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SentenceConfig {
    pub pooling: PoolMode,
    /// A `Normalize` module follows the pooling.
    pub normalize: bool,
    /// `max_seq_length`, if the folder says.
    pub max_seq_length: Option<usize>,
}

#[derive(Deserialize)]
struct Module {
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    path: String,
}

#[derive(Deserialize, Default)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode: Option<String>,
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
}

#[derive(Deserialize)]
struct SbertConfig {
    #[serde(default)]
    max_seq_length: Option<usize>,
}

impl SentenceConfig {
    /// Reads the sentence-transformers files of `dir`; a folder without `modules.json` is a
    /// plain transformer, pooled by mean and not normalised (what sentence-transformers
    /// builds for one).
    pub fn read(dir: &Path) -> Result<Self, HfError> {
        let sbert = dir.join("sentence_bert_config.json");
        let max_seq_length = if sbert.exists() {
            read_json::<SbertConfig>(&sbert)?.max_seq_length
        } else {
            None
        };
        let modules_path = dir.join("modules.json");
        if !modules_path.exists() {
            return Ok(SentenceConfig {
                pooling: PoolMode::Mean,
                normalize: false,
                max_seq_length,
            });
        }
        let modules: Vec<Module> = read_json(&modules_path)?;
        let mut pooling = PoolMode::Mean;
        let mut normalize = false;
        for m in &modules {
            let kind = m.ty.rsplit('.').next().unwrap_or("");
            match kind {
                "Transformer" => {}
                "Normalize" => normalize = true,
                "Pooling" => {
                    let p = dir.join(&m.path).join("config.json");
                    pooling = read_pooling(&p)?;
                }
                _ => {
                    return Err(HfError::Config {
                        path: modules_path.display().to_string(),
                        message: format!(
                            "module {} is not supported (only Transformer, Pooling, Normalize)",
                            m.ty
                        ),
                    })
                }
            }
        }
        Ok(SentenceConfig {
            pooling,
            normalize,
            max_seq_length,
        })
    }
}

fn read_pooling(path: &Path) -> Result<PoolMode, HfError> {
    let c: PoolingConfig = if path.exists() {
        read_json(path)?
    } else {
        PoolingConfig::default()
    };
    let unsupported = |what: &str| HfError::Config {
        path: path.display().to_string(),
        message: format!("{what} pooling is not supported (mean, cls or lasttoken)"),
    };
    if let Some(mode) = c.pooling_mode.as_deref() {
        return match mode {
            "mean" => Ok(PoolMode::Mean),
            "cls" => Ok(PoolMode::First),
            "lasttoken" => Ok(PoolMode::Last),
            other => Err(unsupported(other)),
        };
    }
    if c.pooling_mode_max_tokens {
        return Err(unsupported("max"));
    }
    if c.pooling_mode_mean_sqrt_len_tokens {
        return Err(unsupported("mean_sqrt_len"));
    }
    if c.pooling_mode_weightedmean_tokens {
        return Err(unsupported("weightedmean"));
    }
    let modes = [
        (c.pooling_mode_cls_token, PoolMode::First),
        (c.pooling_mode_mean_tokens, PoolMode::Mean),
        (c.pooling_mode_lasttoken, PoolMode::Last),
    ];
    let on: Vec<PoolMode> = modes.iter().filter(|(b, _)| *b).map(|(_, m)| *m).collect();
    match on.as_slice() {
        [] => Ok(PoolMode::Mean),
        [m] => Ok(*m),
        _ => Err(unsupported("combined")),
    }
}
