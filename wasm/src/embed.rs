//! `embed(texts, options)`: embedding vectors in the browser, from an embedding model (a BERT
//! GGUF, loaded as one) or from the loaded chat model (an embedder made on first use, on a
//! backend of its own of the same kind).

use serde::Deserialize;
use wasm_bindgen::prelude::*;
use weft_core::backend::{cpu::CpuBackend, Backend};
use weft_core::embed::{EmbedInput, EmbedOptions, Embedder};

use crate::js::{self, error};
use crate::WeftEngine;

/// A loaded embedding model (it does not generate text).
pub(crate) struct Encoder {
    pub embedder: Embedder,
    pub name: String,
    pub file_size: usize,
}

/// `embed(texts, options)`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct EmbedJsOptions {
    /// L2-normalise (default: as the model's config says).
    pub normalize: Option<bool>,
    /// Keep the first N components (then normalise again).
    pub dimensions: Option<usize>,
    /// Cut inputs longer than the model takes (default true; false makes them an error).
    pub truncate: Option<bool>,
}

/// The texts argument: one string or an array of strings.
#[derive(Deserialize)]
#[serde(untagged)]
enum Texts {
    One(String),
    Many(Vec<String>),
}

impl Default for Texts {
    fn default() -> Self {
        Texts::Many(Vec::new())
    }
}

#[wasm_bindgen]
impl WeftEngine {
    /// Embeds `texts` (a string or an array of strings). `options`: `{normalize, dimensions,
    /// truncate}`. Resolves to `{embeddings: number[][], dim, promptTokens}`.
    pub async fn embed(&mut self, texts: JsValue, options: JsValue) -> Result<JsValue, JsValue> {
        let texts: Texts = js::from_js(&texts, "texts")?;
        let texts = match texts {
            Texts::One(s) => vec![s],
            Texts::Many(v) => v,
        };
        let o: EmbedJsOptions = js::from_js(&options, "embed options")?;
        let opts = EmbedOptions {
            normalize: o.normalize,
            dimensions: o.dimensions,
            truncate: o.truncate.unwrap_or(true),
        };
        let inputs: Vec<EmbedInput> = texts.into_iter().map(EmbedInput::Text).collect();
        let e = self.embedder().await?;
        let out = e.embed_async(&inputs, &opts).await.map_err(error)?;
        let dim = out.vectors.first().map_or(0, Vec::len);
        js::to_js(&serde_json::json!({
            "embeddings": out.vectors,
            "dim": dim,
            "promptTokens": out.prompt_tokens,
        }))
    }
}

impl WeftEngine {
    /// The embedder of the loaded model, made on first use for a chat model.
    // `if let Some(e) = &mut self.encoder { return ... }` would keep `self` borrowed for the
    // rest of the function (the borrow checker's conditional-return limitation).
    #[allow(clippy::unnecessary_unwrap)]
    async fn embedder(&mut self) -> Result<&mut Embedder, JsValue> {
        if self.encoder.is_some() {
            return Ok(&mut self.encoder.as_mut().expect("checked").embedder);
        }
        let webgpu = self.backend == "webgpu";
        let gpu_opts = self.gpu_opts.clone();
        let l = self.model_mut()?;
        if l.embedder.is_none() {
            let backend: Box<dyn Backend> = if webgpu {
                Box::new(crate::open_webgpu(&gpu_opts).await?)
            } else {
                Box::new(CpuBackend::new(1))
            };
            let e = Embedder::from_gguf(l.model.file.clone(), backend)
                .map_err(|e| error(format!("cannot embed with this model: {e}")))?;
            l.embedder = Some(e);
        }
        Ok(l.embedder.as_mut().expect("just made"))
    }

    /// Loads an embedding model (`file` is a BERT GGUF) on `backend`, compiling its kernels
    /// with one warm-up input.
    pub(crate) async fn load_encoder(
        &mut self,
        file: std::sync::Arc<weft_core::gguf::ModelFile>,
        backend: Box<dyn Backend>,
        name: String,
        file_size: usize,
    ) -> Result<(), JsValue> {
        let mut embedder = Embedder::from_gguf(file, backend)
            .map_err(|e| error(format!("cannot load the model: {e}")))?;
        embedder
            .embed_async(&["".into()], &EmbedOptions::default())
            .await
            .map_err(|e| error(format!("the first step failed: {e}")))?;
        self.encoder = Some(Encoder {
            embedder,
            name,
            file_size,
        });
        Ok(())
    }

    /// `info().model` of a loaded embedding model.
    pub(crate) fn encoder_info(&self) -> Option<serde_json::Value> {
        let e = self.encoder.as_ref()?;
        let c = e.embedder.config();
        Some(serde_json::json!({
            "name": e.name,
            "architecture": e.embedder.architecture(),
            "fileSize": e.file_size,
            "kind": "embedding",
            "embedding": c.dim,
            "maxTokens": c.max_tokens,
            "normalize": c.normalize,
            "chatTemplate": false,
        }))
    }
}
