//! A model resident in memory: its weights on a backend, tokenizer, chat template, and the
//! scheduler thread that serves it. Loading and unloading happen here and nowhere else.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use weft_core::backend::{Backend, KvDtype};
use weft_core::chat::ChatTemplate;
use weft_core::embed::Embedder;
use weft_core::engine::EngineConfig;
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::loaded::LoadedModel;
use weft_core::model::ModelInfo;
use weft_core::scheduler::{Handle, Scheduler, SchedulerConfig};
use weft_core::tokenizer::Tokenizer;

use super::embed_worker::EmbedWorker;
use super::facts::Facts;

/// Makes a backend for each model that loads (each model owns its own).
pub type BackendFactory = Arc<dyn Fn() -> anyhow::Result<Box<dyn Backend>> + Send + Sync>;

/// How every model is loaded.
#[derive(Clone)]
pub struct LoadConfig {
    pub backend: BackendFactory,
    /// Context per sequence.
    pub n_ctx: usize,
    /// Sequence slots per model: a number (`--parallel N`) or sized from each model.
    pub parallel: Slots,
    /// Most rows per engine step.
    pub batch: usize,
    /// Requests allowed to wait for a slot, per model.
    pub queue: usize,
}

/// How many sequences a model decodes at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slots {
    Fixed(usize),
    /// As many as fit `kv_budget` bytes of full-context KV cache, from 1 to [`AUTO_MAX_SLOTS`].
    Auto {
        kv_budget: u64,
    },
}

/// The most slots `--parallel auto` gives a model: where a batched decode step of the CPU
/// backend stops gaining (the GEMM kernels take over at 12 rows and are compute-bound by 16 on
/// 2 cores), and as many as llama-server's usual `-np 16`.
pub const AUTO_MAX_SLOTS: usize = 16;

/// The share of the memory budget `--parallel auto` lets one model's cache take (every slot at
/// full context).
pub const AUTO_KV_SHARE: u64 = 8;

impl Slots {
    /// The slots for a model whose cache takes `kv_bytes_per_position` per position, at
    /// `n_ctx` positions per slot.
    pub fn for_model(self, kv_bytes_per_position: u64, n_ctx: usize) -> usize {
        match self {
            Slots::Fixed(n) => n,
            Slots::Auto { kv_budget } => {
                let per_slot = (kv_bytes_per_position * n_ctx as u64).max(1);
                ((kv_budget / per_slot) as usize).clamp(1, AUTO_MAX_SLOTS)
            }
        }
    }
}

/// A loaded model and the scheduler serving it.
pub struct Loaded {
    /// The chat scheduler; `None` for an embedding model (it does not generate text).
    pub handle: Option<Handle>,
    /// Embedding requests (every model can embed).
    pub embed: EmbedWorker,
    pub tokenizer: Arc<Tokenizer>,
    pub template: Option<ChatTemplate>,
    pub info: ModelInfo,
    pub facts: Arc<Facts>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl LoadConfig {
    /// The sequence slots `facts`' model is loaded with.
    pub fn slots(&self, facts: &Facts) -> usize {
        self.parallel
            .for_model(facts.kv_bytes_per_position(), self.n_ctx)
    }
}

impl Loaded {
    /// Opens the file as a [`LoadedModel`] and starts the scheduler thread on its engine.
    pub fn load(facts: Arc<Facts>, cfg: &LoadConfig) -> anyhow::Result<Loaded> {
        if facts.embedding_only() {
            return Self::load_encoder(facts, cfg);
        }
        let backend = (cfg.backend)()?;
        let engine_cfg = EngineConfig {
            kv: KvCacheConfig {
                n_ctx: cfg.n_ctx,
                n_seq: cfg.slots(&facts),
                dtype: KvDtype::F16,
            },
            max_batch: cfg.batch,
        };
        let LoadedModel {
            file,
            engine,
            tokenizer,
            template,
            ..
        } = LoadedModel::open(&facts.path, backend, engine_cfg, &mut |_, _| {})?;
        let info = engine.model_info().clone();
        let (sched, handle) = Scheduler::new(
            engine,
            tokenizer.clone(),
            SchedulerConfig {
                queue: cfg.queue,
                step_tokens: cfg.batch,
            },
        )?;
        let thread = std::thread::Builder::new()
            .name("weft-scheduler".into())
            .spawn(move || sched.run())?;
        // Embeddings of a chat model: an embedder of its own, made on the first request.
        let make_backend = cfg.backend.clone();
        let embed = EmbedWorker::start(Box::new(move || {
            Ok(Embedder::from_gguf(file, make_backend()?)?)
        }))?;
        Ok(Loaded {
            handle: Some(handle),
            embed,
            tokenizer,
            template: template.ok(),
            info,
            facts,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// An embedding model (a BERT GGUF or a Hugging Face folder): its embedder on a worker
    /// thread, no chat scheduler.
    fn load_encoder(facts: Arc<Facts>, cfg: &LoadConfig) -> anyhow::Result<Loaded> {
        use anyhow::Context;
        let path = &facts.path;
        let shown = path.display().to_string();
        let backend = (cfg.backend)()?;
        // The tokenizer is read from the (GGUF or folder) header before the embedder takes the
        // file.
        let (embedder, tokenizer) = if path.is_dir() {
            let hf = weft_core::hf::HfModel::open(path)?;
            let tok = Tokenizer::from_gguf(&hf.file.gguf).with_context(|| shown.clone())?;
            let e = Embedder::from_hf(hf, backend).with_context(|| shown.clone())?;
            (e, tok)
        } else {
            let file = Arc::new(ModelFile::open(path).with_context(|| shown.clone())?);
            let tok = Tokenizer::from_gguf(&file.gguf).with_context(|| shown.clone())?;
            let e = Embedder::from_gguf(file, backend).with_context(|| shown.clone())?;
            (e, tok)
        };
        let info = embedder.model_info().clone();
        Ok(Loaded {
            handle: None,
            embed: EmbedWorker::ready(embedder)?,
            tokenizer: Arc::new(tokenizer),
            template: None,
            info,
            facts,
            thread: Mutex::new(None),
        })
    }

    /// Stops the scheduler once its running requests end and waits for its thread, so the
    /// engine (weights, cache) is freed when this returns. Blocks: call off the async runtime.
    pub fn stop(&self) {
        if let Some(h) = &self.handle {
            h.shutdown();
        }
        self.embed.stop();
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Qwen2.5 0.5B: 24 layers × 2 KV heads × 64 dims × (K + V) × 2 bytes (f16).
    const QWEN_KV_PER_POSITION: u64 = 24 * 2 * 64 * 2 * 2;

    #[test]
    fn auto_slots_fit_the_cache_budget_between_one_and_the_maximum() {
        let fixed = Slots::Fixed(3);
        assert_eq!(fixed.for_model(QWEN_KV_PER_POSITION, 4096), 3);
        let per_slot_4k = QWEN_KV_PER_POSITION * 4096; // 48 MiB
        let auto = |budget: u64| Slots::Auto { kv_budget: budget };
        // Whole slots only.
        assert_eq!(
            auto(5 * per_slot_4k + per_slot_4k / 2).for_model(QWEN_KV_PER_POSITION, 4096),
            5
        );
        // A budget smaller than one slot still serves one sequence.
        assert_eq!(
            auto(per_slot_4k / 3).for_model(QWEN_KV_PER_POSITION, 4096),
            1
        );
        assert_eq!(auto(0).for_model(QWEN_KV_PER_POSITION, 4096), 1);
        // Plenty of memory: capped where batching stops gaining.
        assert_eq!(
            auto(u64::MAX / 2).for_model(QWEN_KV_PER_POSITION, 4096),
            AUTO_MAX_SLOTS
        );
        // A shorter context gives more slots from the same budget.
        let b = auto(4 * per_slot_4k);
        assert_eq!(b.for_model(QWEN_KV_PER_POSITION, 4096), 4);
        assert_eq!(b.for_model(QWEN_KV_PER_POSITION, 2048), 8);
        // A 16 GiB machine's default (an eighth of a 12 GiB budget) gives Qwen 0.5B at 4096
        // tokens the full sixteen slots.
        let budget = (12u64 << 30) / AUTO_KV_SHARE;
        assert_eq!(auto(budget).for_model(QWEN_KV_PER_POSITION, 4096), 16);
        // A model with no KV (an encoder) does not divide by zero.
        assert_eq!(auto(1 << 30).for_model(0, 4096), AUTO_MAX_SLOTS);
    }
}
