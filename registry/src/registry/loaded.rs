//! A model resident in memory: its weights on a backend, tokenizer, chat template, and the
//! scheduler thread that serves it. Loading and unloading happen here and nowhere else.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use weft_core::backend::{Backend, KvDtype, KV_BLOCK};
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
use super::projector::Vision;

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
    /// Positions in each model's KV block pool (`--kv-size`); `None`: sized by `parallel`.
    pub kv_size: Option<usize>,
    /// Most rows per engine step.
    pub batch: usize,
    /// Requests allowed to wait for a slot, per model.
    pub queue: usize,
}

/// How many sequences a model decodes at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slots {
    /// `--parallel N`: N sequences, each with a full context in the pool unless `--kv-size`
    /// says otherwise.
    Fixed(usize),
    /// A pool of as many positions as fit `kv_budget` bytes (from one context to
    /// [`AUTO_MAX_SEQS`] of them), shared by one sequence per [`AUTO_TOKENS_PER_SEQ`] of it,
    /// at most [`AUTO_MAX_SEQS`].
    Auto { kv_budget: u64 },
}

/// The most sequences `--parallel auto` runs at once (as many as vLLM-style servers commonly
/// batch; past this a CPU or small GPU gains nothing from a wider decode step).
pub const AUTO_MAX_SEQS: usize = 64;

/// Pool positions `--parallel auto` plans per sequence: a short chat's prompt and answer.
/// Longer ones still run (each may grow to the whole context); when the pool runs out the
/// scheduler preempts the newest and feeds it again later.
pub const AUTO_TOKENS_PER_SEQ: usize = 512;

/// The share of the memory budget `--parallel auto` lets one model's KV pool take.
pub const AUTO_KV_SHARE: u64 = 8;

/// One model's concurrent sequences and KV block pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvPlan {
    pub n_seq: usize,
    /// Positions in the shared pool (at least one full context).
    pub pool_tokens: usize,
}

impl Slots {
    /// The plan for a model whose cache takes `kv_bytes_per_position` per position, at
    /// `n_ctx` positions per sequence, with `kv_size` pool positions if the user chose them.
    pub fn plan(self, kv_bytes_per_position: u64, n_ctx: usize, kv_size: Option<usize>) -> KvPlan {
        match self {
            // Whole blocks per sequence, so that N full contexts really fit.
            Slots::Fixed(n) => KvPlan {
                n_seq: n,
                pool_tokens: kv_size
                    .unwrap_or(n * n_ctx.next_multiple_of(KV_BLOCK))
                    .max(n_ctx),
            },
            Slots::Auto { kv_budget } => {
                let fit = kv_budget / kv_bytes_per_position.max(1);
                let fit = usize::try_from(fit).unwrap_or(usize::MAX);
                let pool = kv_size
                    .unwrap_or_else(|| fit.clamp(n_ctx, AUTO_MAX_SEQS * n_ctx))
                    .max(n_ctx);
                let per_seq = AUTO_TOKENS_PER_SEQ.min(n_ctx);
                KvPlan {
                    n_seq: (pool / per_seq).clamp(1, AUTO_MAX_SEQS),
                    pool_tokens: pool,
                }
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
    /// The vision encoder, when the model is served with a projector.
    pub vision: Option<Arc<Vision>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl LoadConfig {
    /// The sequences and KV pool `facts`' model is loaded with.
    pub fn plan(&self, facts: &Facts) -> KvPlan {
        self.parallel
            .plan(facts.kv_bytes_per_position(), self.n_ctx, self.kv_size)
    }

    /// The sequence slots `facts`' model is loaded with.
    pub fn slots(&self, facts: &Facts) -> usize {
        self.plan(facts).n_seq
    }
}

impl Loaded {
    /// Opens the file as a [`LoadedModel`] and starts the scheduler thread on its engine.
    pub fn load(facts: Arc<Facts>, cfg: &LoadConfig) -> anyhow::Result<Loaded> {
        if facts.embedding_only() {
            return Self::load_encoder(facts, cfg);
        }
        let backend = (cfg.backend)()?;
        let plan = cfg.plan(&facts);
        let engine_cfg = EngineConfig {
            kv: KvCacheConfig {
                n_ctx: cfg.n_ctx,
                n_seq: plan.n_seq,
                dtype: KvDtype::F16,
                pool_tokens: Some(plan.pool_tokens),
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
        // The projector loads before the scheduler starts, so a bad one fails the load.
        let vision = match &facts.mmproj {
            Some(p) => Some(Arc::new(Vision::load(
                p.clone(),
                (cfg.backend)()?,
                &tokenizer,
                info.n_embd,
            )?)),
            None => None,
        };
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
            vision,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// An embedding model (a BERT GGUF or a Hugging Face folder): its embedder on a worker
    /// thread, no chat scheduler.
    fn load_encoder(facts: Arc<Facts>, cfg: &LoadConfig) -> anyhow::Result<Loaded> {
        use anyhow::Context;
        let path = &facts.path;
        let shown = super::shown(path);
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
            vision: None,
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
    fn auto_sizes_the_pool_from_the_budget_and_runs_many_short_sequences() {
        let fixed = Slots::Fixed(3);
        // A fixed count keeps a full context per sequence unless --kv-size says otherwise.
        assert_eq!(
            fixed.plan(QWEN_KV_PER_POSITION, 4096, None),
            KvPlan {
                n_seq: 3,
                pool_tokens: 3 * 4096
            }
        );
        assert_eq!(
            fixed
                .plan(QWEN_KV_PER_POSITION, 4096, Some(5000))
                .pool_tokens,
            5000
        );
        // A context that is not whole blocks still gets whole blocks per sequence.
        assert_eq!(
            fixed.plan(QWEN_KV_PER_POSITION, 100, None).pool_tokens,
            3 * 128
        );
        // Never less than one full context.
        assert_eq!(
            fixed
                .plan(QWEN_KV_PER_POSITION, 4096, Some(100))
                .pool_tokens,
            4096
        );
        let auto = |budget: u64| Slots::Auto { kv_budget: budget };
        // 48 MiB holds 4096 positions of Qwen 0.5B: one context, shared by eight 512-token chats.
        let ctx_bytes = QWEN_KV_PER_POSITION * 4096;
        assert_eq!(
            auto(ctx_bytes).plan(QWEN_KV_PER_POSITION, 4096, None),
            KvPlan {
                n_seq: 8,
                pool_tokens: 4096
            }
        );
        // Less than a context still gets one (a lone sequence must reach its --ctx).
        assert_eq!(
            auto(ctx_bytes / 3).plan(QWEN_KV_PER_POSITION, 4096, None),
            KvPlan {
                n_seq: 8,
                pool_tokens: 4096
            }
        );
        // A 16 GiB machine's default (an eighth of a 12 GiB budget, 1.5 GiB) holds 131072
        // positions: 64 sequences, four times the 16 full-context slots it used to give.
        let plan = auto((12u64 << 30) / AUTO_KV_SHARE).plan(QWEN_KV_PER_POSITION, 4096, None);
        assert_eq!(
            plan,
            KvPlan {
                n_seq: AUTO_MAX_SEQS,
                pool_tokens: 131072
            }
        );
        assert!(plan.pool_tokens < plan.n_seq * 4096);
        // Plenty of memory: the pool stops at a full context for every sequence.
        assert_eq!(
            auto(u64::MAX / 2).plan(QWEN_KV_PER_POSITION, 4096, None),
            KvPlan {
                n_seq: AUTO_MAX_SEQS,
                pool_tokens: AUTO_MAX_SEQS * 4096
            }
        );
        // A context shorter than 512: one sequence per context of the same pool.
        assert_eq!(
            auto(ctx_bytes).plan(QWEN_KV_PER_POSITION, 256, None).n_seq,
            16
        );
        // --kv-size wins over the budget.
        assert_eq!(
            auto(ctx_bytes).plan(QWEN_KV_PER_POSITION, 4096, Some(2048 * 5)),
            KvPlan {
                n_seq: 20,
                pool_tokens: 10240
            }
        );
        // A model with no KV (an encoder) does not divide by zero.
        assert_eq!(auto(1 << 30).plan(0, 4096, None).n_seq, AUTO_MAX_SEQS);
    }
}
