//! A model resident in memory: its weights on a backend, tokenizer, chat template, and the
//! scheduler thread that serves it. Loading and unloading happen here and nowhere else.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use weft_core::backend::{Backend, KvDtype};
use weft_core::chat::ChatTemplate;
use weft_core::engine::EngineConfig;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::loaded::{Capabilities, LoadedModel};
use weft_core::model::ModelInfo;
use weft_core::scheduler::{Handle, Scheduler, SchedulerConfig};
use weft_core::tokenizer::Tokenizer;

use super::facts::Facts;

/// Makes a backend for each model that loads (each model owns its own).
pub type BackendFactory = Arc<dyn Fn() -> anyhow::Result<Box<dyn Backend>> + Send + Sync>;

/// How every model is loaded.
#[derive(Clone)]
pub struct LoadConfig {
    pub backend: BackendFactory,
    /// Context per sequence.
    pub n_ctx: usize,
    /// Sequence slots per model.
    pub parallel: usize,
    /// Most rows per engine step.
    pub batch: usize,
    /// Requests allowed to wait for a slot, per model.
    pub queue: usize,
}

/// A loaded model and the scheduler serving it.
pub struct Loaded {
    pub handle: Handle,
    pub tokenizer: Arc<Tokenizer>,
    pub template: Option<ChatTemplate>,
    pub capabilities: Capabilities,
    pub info: ModelInfo,
    pub facts: Arc<Facts>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Loaded {
    /// Opens the file as a [`LoadedModel`] and starts the scheduler thread on its engine.
    pub fn load(facts: Arc<Facts>, cfg: &LoadConfig) -> anyhow::Result<Loaded> {
        let backend = (cfg.backend)()?;
        let engine_cfg = EngineConfig {
            kv: KvCacheConfig {
                n_ctx: cfg.n_ctx,
                n_seq: cfg.parallel,
                dtype: KvDtype::F16,
            },
            max_batch: cfg.batch,
        };
        let LoadedModel {
            engine,
            tokenizer,
            template,
            capabilities,
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
        Ok(Loaded {
            handle,
            tokenizer,
            template: template.ok(),
            capabilities,
            info,
            facts,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Stops the scheduler once its running requests end and waits for its thread, so the
    /// engine (weights, cache) is freed when this returns. Blocks: call off the async runtime.
    pub fn stop(&self) {
        self.handle.shutdown();
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}
