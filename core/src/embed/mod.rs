//! Embeddings: one vector per input text, from an encoder (BERT family; a GGUF file or, natively,
//! a Hugging Face folder) or from a decoder chat model (the final hidden state, pooled as Ollama
//! does: the last token unless the file asks otherwise).
//!
//! Inputs are tokenized with the model's special tokens, cut to the longest input the model
//! takes (or refused, without `truncate`), grouped into steps of whole sequences (packed back to
//! back by default, see [`Layout`]), run on the backend, pooled there, and then L2-normalised
//! (as the model's sentence-transformers config says, or as asked) and cut to `dimensions`
//! (Matryoshka: cut, then normalised again).
//!
//! ```no_run
//! # use weft_core::{backend::cpu::CpuBackend, embed::{Embedder, EmbedOptions}, hf::HfModel};
//! let hf = HfModel::open("models/all-MiniLM-L6-v2".as_ref()).unwrap();
//! let mut e = Embedder::from_hf(hf, Box::new(CpuBackend::new(2))).unwrap();
//! let out = e.embed(&["hello".into()], &EmbedOptions::default()).unwrap();
//! assert_eq!(out.vectors[0].len(), 384);
//! ```

mod input;
mod plan;

use std::sync::Arc;

pub use input::{EmbedInput, Wrapping};
pub use plan::Layout;

use crate::backend::{
    Backend, BackendError, Graph, KvCacheId, KvCacheSpec, KvDtype, PoolMode, Readback,
};
use crate::gguf::ModelFile;
use crate::model::{self, bert::Bert, Model, ModelError};
use crate::tokenizer::{Tokenizer, TokenizerError};

/// Why inputs could not be embedded. Messages are one line, fit for an API error.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("no input: give at least one text to embed")]
    NoInput,
    #[error("input {index} has no tokens")]
    Empty { index: usize },
    #[error("input {index} has {tokens} tokens, more than the model's {max}; shorten it or allow truncation")]
    TooLong {
        index: usize,
        tokens: usize,
        max: usize,
    },
    #[error("input {index}: token id {id} is outside the vocabulary ({n_vocab} entries)")]
    BadToken {
        index: usize,
        id: u32,
        n_vocab: usize,
    },
    #[error("dimensions must be between 1 and the model's {dim}, got {requested}")]
    BadDimensions { requested: usize, dim: usize },
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
}

/// How a model's vectors are made.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EmbedConfig {
    pub pooling: PoolMode,
    /// L2-normalise by default.
    pub normalize: bool,
    /// The longest input, in tokens (special tokens included).
    pub max_tokens: usize,
    /// Vector length.
    pub dim: usize,
}

/// Per-request options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EmbedOptions {
    /// Override the model's normalisation.
    pub normalize: Option<bool>,
    /// Keep only the first `dimensions` components (then normalise, when normalising).
    pub dimensions: Option<usize>,
    /// Cut inputs longer than the model takes (else they are an error).
    pub truncate: bool,
}

impl Default for EmbedOptions {
    fn default() -> Self {
        EmbedOptions {
            normalize: None,
            dimensions: None,
            truncate: true,
        }
    }
}

/// The vectors of one call, in input order.
#[derive(Clone, Debug, PartialEq)]
pub struct Embeddings {
    pub vectors: Vec<Vec<f32>>,
    /// Tokens embedded (after truncation), special tokens included.
    pub prompt_tokens: usize,
}

/// The network behind an embedder.
enum Net {
    Encoder(Bert),
    /// A decoder with a cache of `slots` sequences of up to `n_ctx` tokens.
    Decoder {
        model: Box<dyn Model>,
        kv: KvCacheId,
        slots: usize,
    },
}

/// Decoders: the longest input and the sequences per step (the cache holds that many).
const DECODER_MAX_CTX: usize = 2048;
const DECODER_SLOTS: usize = 8;
/// Encoders: rows per step (whole sequences; a longer one runs alone).
const ENCODER_STEP_ROWS: usize = 4096;

/// A loaded embedding model with its backend and tokenizer.
pub struct Embedder {
    backend: Box<dyn Backend>,
    net: Net,
    tokenizer: Tokenizer,
    wrap: Wrapping,
    config: EmbedConfig,
    layout: Layout,
    step_rows: usize,
    n_vocab: usize,
    architecture: String,
    info: model::ModelInfo,
}

/// The embedding config a GGUF file implies.
fn gguf_config(file: &ModelFile, default_pool: PoolMode, default_norm: bool) -> (PoolMode, bool) {
    let g = &file.gguf;
    let pool = g
        .arch_key("pooling_type")
        .and_then(|v| v.as_u64())
        .and_then(model::bert::pool_mode_from_gguf)
        .unwrap_or(default_pool);
    let norm = g
        .get_bool("weft.embedding.normalize")
        .unwrap_or(default_norm);
    (pool, norm)
}

impl Embedder {
    /// An embedder for the model in a GGUF file: a BERT encoder, or any decoder this crate
    /// runs. The tokenizer comes from the file's metadata.
    pub fn from_gguf(file: Arc<ModelFile>, backend: Box<dyn Backend>) -> Result<Self, EmbedError> {
        let tokenizer = Tokenizer::from_gguf(&file.gguf)?;
        Self::new(file, backend, tokenizer, None)
    }

    /// An embedder for a Hugging Face folder (see [`crate::hf`]).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn from_hf(hf: crate::hf::HfModel, backend: Box<dyn Backend>) -> Result<Self, EmbedError> {
        let st = hf.sentence;
        let max = hf.max_tokens();
        let mut e = Self::new(hf.file, backend, hf.tokenizer, Some(max))?;
        e.config.pooling = st.pooling;
        e.config.normalize = st.normalize;
        Ok(e)
    }

    fn new(
        file: Arc<ModelFile>,
        mut backend: Box<dyn Backend>,
        tokenizer: Tokenizer,
        max_tokens: Option<usize>,
    ) -> Result<Self, EmbedError> {
        let arch = file.gguf.architecture().unwrap_or_default().to_string();
        let mut progress = |_: usize, _: usize| {};
        let encoder = model::ENCODER_ARCHITECTURES.contains(&arch.as_str());
        let (net, config, step_rows, info) = if encoder {
            let bert = model::load_encoder(&file, backend.as_mut(), &mut progress)?;
            let info = bert.info().clone();
            let max = file
                .gguf
                .get_u64("weft.embedding.max_tokens")
                .map(|m| m as usize)
                .or(max_tokens)
                .unwrap_or(info.n_ctx_train)
                .min(info.n_ctx_train);
            let (pooling, normalize) = gguf_config(&file, PoolMode::Mean, false);
            let config = EmbedConfig {
                pooling: bert.pooling.unwrap_or(pooling),
                normalize,
                max_tokens: max,
                dim: info.n_embd,
            };
            (Net::Encoder(bert), config, ENCODER_STEP_ROWS, info)
        } else {
            let m = model::load(&file, backend.as_mut(), &mut progress)?;
            let info = m.info().clone();
            let n_ctx = info.n_ctx_train.clamp(1, DECODER_MAX_CTX);
            let spec = KvCacheSpec {
                layers: m.kv_layers(n_ctx, n_ctx),
                n_seq: DECODER_SLOTS,
                dtype: KvDtype::F16,
                pool_blocks: None,
            };
            let kv = backend.create_kv_cache(&spec)?;
            // Ollama embeds with decoders through llama.cpp without a pooling type, which
            // gives the last token's hidden state; /api/embed then normalises.
            let (pooling, normalize) = gguf_config(&file, PoolMode::Last, true);
            let config = EmbedConfig {
                pooling,
                normalize,
                max_tokens: n_ctx,
                dim: info.n_embd,
            };
            let net = Net::Decoder {
                model: m,
                kv,
                slots: DECODER_SLOTS,
            };
            (net, config, n_ctx, info)
        };
        let wrap = Wrapping::of(&tokenizer);
        let n_vocab = info.n_vocab.min(tokenizer_vocab(&tokenizer));
        Ok(Embedder {
            backend,
            net,
            tokenizer,
            wrap,
            config,
            layout: Layout::Packed,
            step_rows,
            n_vocab,
            architecture: arch,
            info,
        })
    }

    /// How vectors are made (pooling, normalisation, longest input, length).
    pub fn config(&self) -> &EmbedConfig {
        &self.config
    }

    /// Shape facts of the model.
    pub fn model_info(&self) -> &model::ModelInfo {
        &self.info
    }

    /// `general.architecture` of the model.
    pub fn architecture(&self) -> &str {
        &self.architecture
    }

    /// Whether the model is an encoder (an embedding-only model).
    pub fn is_encoder(&self) -> bool {
        matches!(self.net, Net::Encoder(_))
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The backend's name.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// Steps lay sequences out packed (the default) or padded; and rows per step.
    pub fn set_layout(&mut self, layout: Layout, step_rows: Option<usize>) {
        self.layout = layout;
        if let (Some(r), Net::Encoder(_)) = (step_rows, &self.net) {
            self.step_rows = r.max(1);
        }
    }

    /// The token ids input `index` is embedded from (special tokens included, truncated as
    /// `truncate` says).
    pub fn sequence(
        &self,
        index: usize,
        input: &EmbedInput,
        truncate: bool,
    ) -> Result<Vec<u32>, EmbedError> {
        let max = self.config.max_tokens;
        input::sequence(
            &self.tokenizer,
            &self.wrap,
            index,
            input,
            max,
            truncate,
            self.n_vocab,
        )
    }

    /// Embeds `inputs` (blocking on the backend).
    pub fn embed(
        &mut self,
        inputs: &[EmbedInput],
        opts: &EmbedOptions,
    ) -> Result<Embeddings, EmbedError> {
        let (steps, tokens) = self.plan(inputs, opts)?;
        let mut pooled = vec![Vec::new(); inputs.len()];
        for step in &steps {
            let graph = self.graph(step);
            let out = self.backend.execute(&graph, &step.batch())?;
            place(step, out, &mut pooled)?;
        }
        Ok(self.finish(pooled, tokens, opts))
    }

    /// [`embed`](Self::embed), awaiting the backend's readback (the browser's path).
    pub async fn embed_async(
        &mut self,
        inputs: &[EmbedInput],
        opts: &EmbedOptions,
    ) -> Result<Embeddings, EmbedError> {
        let (steps, tokens) = self.plan(inputs, opts)?;
        let mut pooled = vec![Vec::new(); inputs.len()];
        for step in &steps {
            let graph = self.graph(step);
            let pending = self.backend.submit(&graph, &step.batch())?;
            let out = pending.wait().await?;
            place(step, out, &mut pooled)?;
        }
        Ok(self.finish(pooled, tokens, opts))
    }

    fn plan(
        &self,
        inputs: &[EmbedInput],
        opts: &EmbedOptions,
    ) -> Result<(Vec<plan::Step>, usize), EmbedError> {
        if inputs.is_empty() {
            return Err(EmbedError::NoInput);
        }
        if let Some(d) = opts.dimensions {
            if d == 0 || d > self.config.dim {
                return Err(EmbedError::BadDimensions {
                    requested: d,
                    dim: self.config.dim,
                });
            }
        }
        let mut seqs = Vec::with_capacity(inputs.len());
        for (i, inp) in inputs.iter().enumerate() {
            seqs.push((i, self.sequence(i, inp, opts.truncate)?));
        }
        let tokens = seqs.iter().map(|(_, s)| s.len()).sum();
        let (layout, max_seqs) = match &self.net {
            Net::Encoder(_) => (self.layout, usize::MAX),
            // Each sequence of a decoder step needs its own cache slot; causal attention needs
            // no padding.
            Net::Decoder { slots, .. } => (Layout::Packed, *slots),
        };
        let pad = self.tokenizer.pad().unwrap_or(0);
        let steps = plan::steps(&seqs, self.step_rows, max_seqs, layout, pad);
        Ok((steps, tokens))
    }

    fn graph(&self, step: &plan::Step) -> Graph {
        let mut g = Graph::new(step.tokens.len());
        let out = match &self.net {
            Net::Encoder(bert) => bert.build(&mut g, &step.spans, Some(self.config.pooling)),
            Net::Decoder { model, kv, .. } => {
                if self.config.pooling == PoolMode::Mean {
                    let all: Vec<u32> = (0..step.tokens.len() as u32).collect();
                    let h = model.build_hidden(&mut g, *kv, &all);
                    g.pool(h, step.spans.clone(), PoolMode::Mean)
                } else {
                    let rows: Vec<u32> = step
                        .spans
                        .iter()
                        .map(|s| match self.config.pooling {
                            PoolMode::First => s.start,
                            _ => s.start + s.valid - 1,
                        })
                        .collect();
                    model.build_hidden(&mut g, *kv, &rows)
                }
            }
        };
        g.output(out);
        g
    }

    fn finish(&self, pooled: Vec<Vec<f32>>, tokens: usize, opts: &EmbedOptions) -> Embeddings {
        let normalize = opts.normalize.unwrap_or(self.config.normalize);
        let vectors = pooled
            .into_iter()
            .map(|mut v| {
                if let Some(d) = opts.dimensions {
                    v.truncate(d);
                }
                if normalize {
                    l2_normalize(&mut v);
                }
                v
            })
            .collect();
        Embeddings {
            vectors,
            prompt_tokens: tokens,
        }
    }
}

fn tokenizer_vocab(t: &Tokenizer) -> usize {
    match t.vocab_size() {
        0 => usize::MAX,
        n => n,
    }
}

/// Puts a step's pooled rows at their inputs.
fn place(step: &plan::Step, out: Vec<Readback>, pooled: &mut [Vec<f32>]) -> Result<(), EmbedError> {
    let Some(Readback::F32 { rows, cols, data }) = out.into_iter().next() else {
        return Err(BackendError::InvalidStep("the step returned no vectors".into()).into());
    };
    if rows != step.inputs.len() || data.len() != rows * cols {
        return Err(BackendError::InvalidStep("the step returned the wrong shape".into()).into());
    }
    for (r, &i) in step.inputs.iter().enumerate() {
        pooled[i] = data[r * cols..(r + 1) * cols].to_vec();
    }
    Ok(())
}

/// Scales `v` to unit length (as sentence-transformers' Normalize: divided by max(‖v‖, 1e-12)).
pub fn l2_normalize(v: &mut [f32]) {
    let n = v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    let inv = 1.0 / n.max(1e-12);
    v.iter_mut().for_each(|x| *x = (*x as f64 * inv) as f32);
}

/// Cosine similarity of two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let na: f64 = a.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}
