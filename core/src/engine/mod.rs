//! The engine: a model, the backend holding it, and the KV cache, driven a step at a time.
//!
//! [`Engine::step`] runs one batch of rows that may mix sequences (prefill chunks and decode
//! tokens), which is what continuous batching needs; [`Engine::prefill`] and
//! [`Engine::decode`] are the one-sequence conveniences on top. Generating text on them is
//! [`generation`](crate::generation)'s work.

mod mrope;
mod prompt;
mod step_async;

pub use prompt::{Prompt, PromptPiece};

use std::sync::Arc;

use crate::backend::{Backend, BackendError, KvCacheId, KvCacheSpec};
use crate::gguf::ModelFile;
use crate::kv_cache::{KvCacheConfig, KvError, SeqTable};
use crate::model::{self, Model, ModelError};

/// Engine settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    pub kv: KvCacheConfig,
    /// Most rows per step (a longer prompt is processed in chunks of this size).
    pub max_batch: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            kv: KvCacheConfig::default(),
            max_batch: 512,
        }
    }
}

/// Why the engine failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum EngineError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Kv(#[from] KvError),
    #[error("invalid request: {0}")]
    Invalid(String),
}

/// One row of a step: a token of a sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub seq: u32,
    pub token: u32,
    /// Whether this row's logits are wanted.
    pub logits: bool,
}

/// A model loaded on a backend, with its KV cache.
pub struct Engine {
    model: Box<dyn Model>,
    backend: Box<dyn Backend>,
    kv: KvCacheId,
    seqs: SeqTable,
    cfg: EngineConfig,
    /// Rotary position shifts after images, for models with M-RoPE.
    rope_shifts: mrope::RopeShifts,
}

impl Engine {
    /// Loads the model in `file` onto `backend` and allocates its cache.
    /// `progress(done, total)` reports tensors loaded.
    pub fn load(
        file: Arc<ModelFile>,
        mut backend: Box<dyn Backend>,
        cfg: EngineConfig,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Self, EngineError> {
        if cfg.kv.n_ctx == 0 || cfg.max_batch == 0 || cfg.kv.n_seq == 0 {
            return Err(EngineError::Invalid(
                "context, batch size and sequence count must be positive".into(),
            ));
        }
        let model = model::load(&file, backend.as_mut(), progress)?;
        let spec = KvCacheSpec {
            layers: model.kv_layers(cfg.kv.n_ctx, cfg.max_batch),
            n_seq: cfg.kv.n_seq,
            dtype: cfg.kv.dtype,
            pool_blocks: Some(cfg.kv.pool_blocks()),
        };
        let kv = backend.create_kv_cache(&spec)?;
        Ok(Engine {
            model,
            backend,
            kv,
            seqs: SeqTable::new(&cfg.kv),
            cfg,
            rope_shifts: mrope::RopeShifts::default(),
        })
    }

    /// The model's shape facts.
    pub fn model_info(&self) -> &model::ModelInfo {
        self.model.info()
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Sequence slots and the block pool.
    pub fn seqs(&self) -> &SeqTable {
        &self.seqs
    }

    /// How far back (in positions) a sequence can be truncated without losing keys that a
    /// sliding-window layer's ring buffer has already overwritten; `usize::MAX` when no layer
    /// has a window. Used by prefix reuse.
    pub fn rewind_limit(&self) -> usize {
        self.model
            .kv_layers(self.cfg.kv.n_ctx, self.cfg.max_batch)
            .iter()
            .filter_map(|l| l.window.map(|w| l.capacity.saturating_sub(w + 1)))
            .min()
            .unwrap_or(usize::MAX)
    }

    /// Takes a free sequence slot.
    pub fn new_sequence(&mut self) -> Result<u32, EngineError> {
        let seq = self.seqs.acquire()?;
        self.rope_shifts.truncate(seq, 0);
        Ok(seq)
    }

    /// Frees a sequence slot.
    pub fn free_sequence(&mut self, seq: u32) -> Result<(), EngineError> {
        self.seqs.release(seq)?;
        self.rope_shifts.truncate(seq, 0);
        Ok(())
    }

    /// Forgets a sequence's positions from `len` on.
    pub fn truncate(&mut self, seq: u32, len: usize) -> Result<(), EngineError> {
        self.seqs.truncate(seq, len)?;
        self.rope_shifts.truncate(seq, len);
        Ok(())
    }

    /// Starts sequence `dst` with the first `n` cached positions of sequence `src` (what it
    /// held before is forgotten): a prompt sharing its start with another sequence's tokens
    /// takes their keys and values instead of computing them. The caller keeps `n` within
    /// what a sliding-window layer still holds of `src` ([`Engine::rewind_limit`]). A refused
    /// request changes nothing; a copy that fails leaves `dst` empty.
    pub fn copy_prefix(&mut self, src: u32, dst: u32, n: usize) -> Result<(), EngineError> {
        let held = self.seqs.len(src)?;
        if n > held || src == dst {
            return Err(EngineError::Invalid(format!(
                "cannot copy {n} positions of sequence {src} (it holds {held}) to sequence {dst}"
            )));
        }
        self.seqs.truncate(dst, 0)?;
        self.seqs.advance(dst, n)?;
        self.rope_shifts.copy_prefix(src, dst, n);
        let copied = self
            .send_tables()
            .and_then(|_| Ok(self.backend.copy_prefix(self.kv, src, dst, n)?));
        if copied.is_err() {
            self.seqs.truncate(dst, 0)?;
            self.rope_shifts.truncate(dst, 0);
            // The backend may hold part of the update: send every table again next time.
            self.seqs.mark_all_changed();
        }
        copied
    }

    /// Runs one step: every row's token is appended to its sequence (in row order). Returns the
    /// logits of the rows with `logits` set, in row order.
    pub fn step(&mut self, rows: &[Row]) -> Result<Vec<Vec<f32>>, EngineError> {
        let plan = self.plan_step(rows)?;
        let result = self.backend.execute(&plan.graph, &plan.batch());
        self.finish_step(&plan, result)
    }

    /// Appends `tokens` to a sequence (in chunks of `max_batch`) and returns the logits after
    /// the last one. A prompt longer than the room left in the context is an error, checked
    /// before any work.
    pub fn prefill(&mut self, seq: u32, tokens: &[u32]) -> Result<Vec<f32>, EngineError> {
        let mut last = Vec::new();
        for rows in self.prefill_batches(seq, tokens)? {
            if let Some(l) = self.step(&rows)?.pop() {
                last = l;
            }
        }
        Ok(last)
    }

    /// A prompt's steps: chunks of `max_batch` rows, logits asked only for the last token.
    /// Checks the prompt is non-empty and fits the room left, before any work.
    fn prefill_batches(&self, seq: u32, tokens: &[u32]) -> Result<Vec<Vec<Row>>, EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::Invalid("empty prompt".into()));
        }
        self.seqs.check_room(seq, tokens.len())?;
        let n = tokens.len();
        Ok(tokens
            .chunks(self.cfg.max_batch)
            .enumerate()
            .map(|(ci, chunk)| {
                let first = ci * self.cfg.max_batch;
                chunk
                    .iter()
                    .enumerate()
                    .map(|(i, &token)| Row {
                        seq,
                        token,
                        logits: first + i + 1 == n,
                    })
                    .collect()
            })
            .collect())
    }

    /// Appends one token to a sequence and returns the next logits.
    pub fn decode(&mut self, seq: u32, token: u32) -> Result<Vec<f32>, EngineError> {
        let mut out = self.step(&[Row {
            seq,
            token,
            logits: true,
        }])?;
        out.pop()
            .ok_or_else(|| EngineError::Invalid("the backend returned no logits".into()))
    }
}
