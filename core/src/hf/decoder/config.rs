//! `config.json` of a decoder folder (llama, qwen2, gemma3) and the GGUF metadata llama.cpp's
//! `convert_hf_to_gguf.py` writes for it (`general.*` and `{arch}.*` keys).

use std::path::Path;

use serde::Deserialize;

use crate::gguf::Value;
use crate::hf::config::read_json;
use crate::hf::HfError;

/// The decoder families the converter knows, by their GGUF architecture names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Llama and its descendants that keep its layout (SmolLM, TinyLlama, Mistral-style).
    Llama,
    Qwen2,
    /// Qwen2.5-VL's text model: qwen2 with M-RoPE (`rope.dimension_sections`).
    Qwen2VL,
    Gemma3,
}

impl Family {
    /// `general.architecture`.
    pub fn arch(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
            Family::Qwen2VL => "qwen2vl",
            Family::Gemma3 => "gemma3",
        }
    }

    fn from_config(model_type: &str, archs: &[String]) -> Option<Family> {
        let by_type = match model_type {
            // Idefics3 / SmolVLM keep a llama under model.text_model.
            "llama" | "mistral" | "idefics3" | "smolvlm" => Some(Family::Llama),
            "qwen2" => Some(Family::Qwen2),
            "qwen2_5_vl" => Some(Family::Qwen2VL),
            "gemma3_text" | "gemma3" => Some(Family::Gemma3),
            _ => None,
        };
        by_type.or_else(|| {
            archs.iter().find_map(|a| match a.as_str() {
                "LlamaForCausalLM"
                | "MistralForCausalLM"
                | "Idefics3ForConditionalGeneration"
                | "SmolVLMForConditionalGeneration" => Some(Family::Llama),
                "Qwen2ForCausalLM" => Some(Family::Qwen2),
                "Qwen2_5_VLForConditionalGeneration" => Some(Family::Qwen2VL),
                "Gemma3ForCausalLM" | "Gemma3ForConditionalGeneration" => Some(Family::Gemma3),
                _ => None,
            })
        })
    }
}

/// The `config.json` fields a decoder conversion reads.
#[derive(Clone, Debug, Deserialize)]
pub struct DecoderConfig {
    #[serde(default)]
    pub model_type: String,
    #[serde(default)]
    pub architectures: Vec<String>,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    #[serde(default)]
    pub head_dim: Option<usize>,
    #[serde(default)]
    pub max_position_embeddings: Option<usize>,
    #[serde(default)]
    pub rms_norm_eps: Option<f64>,
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default)]
    pub vocab_size: Option<usize>,
    #[serde(default)]
    pub sliding_window: Option<usize>,
    #[serde(default)]
    pub tie_word_embeddings: Option<bool>,
    #[serde(default)]
    pub bos_token_id: Option<serde_json::Value>,
    #[serde(default)]
    pub eos_token_id: Option<serde_json::Value>,
    #[serde(skip)]
    pub family: Option<Family>,
    /// Qwen2.5-VL's M-RoPE sections (`rope_scaling.mrope_section`).
    #[serde(skip)]
    pub mrope_section: Vec<usize>,
}

impl DecoderConfig {
    /// Reads `config.json`, refusing families the converter does not know.
    pub fn read(path: &Path) -> Result<Self, HfError> {
        // The family first, so an unsupported model says so rather than missing a field.
        let raw: serde_json::Value = read_json(path)?;
        let model_type = raw["model_type"].as_str().unwrap_or_default().to_string();
        let model_type = model_type.as_str();
        let archs: Vec<String> = raw["architectures"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let family = Family::from_config(model_type, &archs).ok_or_else(|| HfError::Config {
            path: path.display().to_string(),
            message: format!(
                "model type {model_type:?} ({}) cannot be converted (supported decoders: \
                 llama, qwen2, gemma3)",
                archs.join(", ")
            ),
        })?;
        // Vision-language folders keep the text model's fields in text_config; the converter
        // reads them over the top level (llama.cpp: `{**hparams, **text_config}`).
        let mut raw = raw;
        if let Some(text) = raw.get("text_config").and_then(|t| t.as_object()).cloned() {
            let top = raw
                .as_object_mut()
                .expect("a JSON object has a text_config");
            for (k, v) in text {
                if k != "architectures" && k != "model_type" && !v.is_null() {
                    top.insert(k, v);
                }
            }
        }
        let mrope = raw["rope_scaling"]["mrope_section"].as_array().map(|a| {
            a.iter()
                .filter_map(|v| v.as_u64().map(|x| x as usize))
                .collect::<Vec<_>>()
        });
        let mut c: DecoderConfig = serde_json::from_value(raw).map_err(|e| HfError::Config {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            return Err(HfError::Config {
                path: path.display().to_string(),
                message: "hidden_size is not a multiple of num_attention_heads".into(),
            });
        }
        if family == Family::Qwen2VL {
            let sections = mrope
                .filter(|s| !s.is_empty() && s.len() <= 4)
                .ok_or_else(|| HfError::Config {
                    path: path.display().to_string(),
                    message: "rope_scaling.mrope_section (up to 4 sizes) is missing".into(),
                })?;
            c.mrope_section = sections;
        }
        c.family = Some(family);
        Ok(c)
    }

    pub fn family(&self) -> Family {
        self.family.expect("set by read")
    }

    pub fn n_kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    pub fn head_dim(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads)
    }

    /// The `general.*` and `{arch}.*` keys, as llama.cpp's converter writes them per family.
    pub fn metadata(&self, name: &str) -> Vec<(String, Value)> {
        let arch = self.family().arch();
        let k = |s: &str| format!("{arch}.{s}");
        let u = |x: usize| Value::U32(x as u32);
        let mut m: Vec<(String, Value)> = vec![
            ("general.architecture".into(), Value::String(arch.into())),
            ("general.type".into(), Value::String("model".into())),
            ("general.name".into(), Value::String(name.into())),
            (k("block_count"), u(self.num_hidden_layers)),
        ];
        // Gemma 3's text configs default to 131072 positions when the field is missing.
        let ctx = self.max_position_embeddings.unwrap_or(match self.family() {
            Family::Gemma3 => 131072,
            _ => 2048,
        });
        m.push((k("context_length"), u(ctx)));
        m.push((k("embedding_length"), u(self.hidden_size)));
        m.push((k("feed_forward_length"), u(self.intermediate_size)));
        m.push((k("attention.head_count"), u(self.num_attention_heads)));
        m.push((k("attention.head_count_kv"), u(self.n_kv_heads())));
        let theta = self.rope_theta.unwrap_or(match self.family() {
            Family::Gemma3 => 1_000_000.0,
            _ => 10_000.0,
        });
        m.push((k("rope.freq_base"), Value::F32(theta as f32)));
        let eps = self.rms_norm_eps.unwrap_or(1e-6);
        m.push((
            k("attention.layer_norm_rms_epsilon"),
            Value::F32(eps as f32),
        ));
        match self.family() {
            Family::Llama => {
                if let Some(v) = self.vocab_size {
                    m.push((k("vocab_size"), u(v)));
                }
                m.push((k("rope.dimension_count"), u(self.head_dim())));
            }
            Family::Qwen2 => {}
            Family::Qwen2VL => {
                // Four sections, the missing ones 0, as llama.cpp's Qwen2VLModel pads them.
                let mut s = self.mrope_section.clone();
                s.resize(4, 0);
                let v = s.into_iter().map(|x| Value::I32(x as i32)).collect();
                m.push((k("rope.dimension_sections"), Value::Array(v)));
            }
            Family::Gemma3 => {
                m.push((k("attention.key_length"), u(self.head_dim())));
                m.push((k("attention.value_length"), u(self.head_dim())));
                if let Some(w) = self.sliding_window {
                    m.push((k("attention.sliding_window"), u(w)));
                }
            }
        }
        m
    }
}
