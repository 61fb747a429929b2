//! Engine and generation options as the JavaScript API spells them (camelCase).

use std::sync::Arc;

use serde::Deserialize;
use wasm_bindgen::JsValue;
use weft_core::generation::GenParams;
use weft_core::sampler::{JsonSchema, SamplerConfig};

use crate::js::error;

/// `Weft.create(options)`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateOptions {
    /// `webgpu`, `cpu` or `auto` (WebGPU when available, else CPU). Default `auto`.
    pub backend: Option<String>,
    /// Context length in tokens (default 2048, capped by the model's training context).
    pub context_size: Option<usize>,
    /// WebGPU: use subgroup operations where the browser offers them (default true; false
    /// forces the workgroup-memory reductions, with identical results).
    pub subgroups: Option<bool>,
    /// WebGPU: read f16 data through native `f16` bindings where the browser offers
    /// `shader-f16` (default true; false unpacks u32 words, with identical results).
    pub shader_f16: Option<bool>,
}

impl CreateOptions {
    /// The wgpu backend's options these ask for.
    pub fn wgpu(&self) -> weft_core::backend::wgpu::WgpuOptions {
        weft_core::backend::wgpu::WgpuOptions {
            no_subgroups: self.subgroups == Some(false),
            no_f16: self.shader_f16 == Some(false),
            ..Default::default()
        }
    }
}

/// `chat(messages, options)` / `complete(prompt, options)`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct GenOptions {
    pub max_tokens: usize,
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub min_p: f32,
    pub repeat_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub seed: Option<u64>,
    /// Stop strings (the text before the first match is returned).
    pub stop: Vec<String>,
    /// Keep going past end-of-generation tokens.
    pub ignore_eos: bool,
    /// `complete` only: parse special-token text in the prompt (default false).
    pub special: bool,
    /// `chat` only: extra template variables, e.g. `{"enable_thinking": false}`.
    pub template_vars: Option<serde_json::Value>,
    /// Structured output: the reply is one JSON value of this JSON Schema (`{}` or
    /// `{"type": "object"}` for any object), and generation stops when it is complete.
    pub json_schema: Option<serde_json::Value>,
    /// Return each step's best `top_logits` raw (id, logit) pairs in the result's `steps`
    /// (0: none; at most 20).
    pub top_logits: usize,
}

impl Default for GenOptions {
    fn default() -> Self {
        let s = SamplerConfig::default();
        GenOptions {
            max_tokens: 256,
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            min_p: s.min_p,
            repeat_penalty: s.repeat_penalty,
            presence_penalty: s.presence_penalty,
            frequency_penalty: s.frequency_penalty,
            seed: None,
            stop: Vec::new(),
            ignore_eos: false,
            special: false,
            template_vars: None,
            json_schema: None,
            top_logits: 0,
        }
    }
}

impl GenOptions {
    /// The generation settings (`seed` None is filled by the caller).
    pub fn params(&self) -> Result<GenParams, JsValue> {
        let json = match &self.json_schema {
            None => None,
            Some(s) => Some(Arc::new(
                JsonSchema::compile(s).map_err(|e| error(format!("jsonSchema: {e}")))?,
            )),
        };
        Ok(GenParams {
            sampling: SamplerConfig {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                repeat_penalty: self.repeat_penalty,
                presence_penalty: self.presence_penalty,
                frequency_penalty: self.frequency_penalty,
                seed: self.seed,
                ..SamplerConfig::default()
            },
            max_tokens: self.max_tokens,
            stop: self.stop.clone(),
            ignore_eos: self.ignore_eos,
            json,
            ..GenParams::default()
        })
    }
}
