//! A loaded model's embedding worker: a thread of its own holding an [`Embedder`] (for an
//! embedding model, the model itself; for a chat model, a second instance made on first use,
//! on its own backend — on the CPU it shares the memory-mapped weights). Embedding requests
//! queue here, never on the chat scheduler, so a large one does not hold up running chat
//! streams between their steps (the two share the CPU cores).

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tokio::sync::oneshot;
use weft_core::embed::{EmbedConfig, EmbedError, EmbedInput, EmbedOptions, Embedder, Embeddings};

/// Makes the embedder on the worker thread (a chat model's, on first use).
pub type MakeEmbedder = Box<dyn FnOnce() -> anyhow::Result<Embedder> + Send>;

struct Job {
    inputs: Vec<EmbedInput>,
    opts: EmbedOptions,
    reply: oneshot::Sender<Result<Embeddings, WorkerError>>,
}

/// Why a job failed: the request (a client error), or the model.
#[derive(Debug)]
pub enum WorkerError {
    Input(EmbedError),
    Model(String),
}

/// The worker thread and its queue.
pub struct EmbedWorker {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// How the embedder makes vectors, once it exists.
    config: Arc<Mutex<Option<EmbedConfig>>>,
}

impl EmbedWorker {
    /// Starts the worker around a ready embedder.
    pub fn ready(e: Embedder) -> anyhow::Result<Self> {
        Self::start(Box::new(move || Ok(e)))
    }

    /// Starts the worker; `make` runs on its thread when the first job arrives.
    pub fn start(make: MakeEmbedder) -> anyhow::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        let config = Arc::new(Mutex::new(None));
        let cfg = config.clone();
        let thread = std::thread::Builder::new()
            .name("weft-embed".into())
            .spawn(move || run(make, rx, cfg))?;
        Ok(EmbedWorker {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            config,
        })
    }

    /// The embedder's config, once it has been made.
    pub fn config(&self) -> Option<EmbedConfig> {
        *self.config.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a job and waits for its vectors.
    pub async fn embed(
        &self,
        inputs: Vec<EmbedInput>,
        opts: EmbedOptions,
    ) -> Result<Embeddings, WorkerError> {
        let (reply, rx) = oneshot::channel();
        let sent = self
            .tx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|tx| {
                tx.send(Job {
                    inputs,
                    opts,
                    reply,
                })
                .is_ok()
            });
        if sent != Some(true) {
            return Err(WorkerError::Model("the model is unloading".into()));
        }
        rx.await
            .unwrap_or_else(|_| Err(WorkerError::Model("the embedding worker stopped".into())))
    }

    /// Ends the queue and waits for the thread (the embedder is freed when this returns).
    pub fn stop(&self) {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

fn run(make: MakeEmbedder, rx: mpsc::Receiver<Job>, cfg: Arc<Mutex<Option<EmbedConfig>>>) {
    let mut make = Some(make);
    let mut embedder: Option<Embedder> = None;
    let mut failed: Option<String> = None;
    while let Ok(job) = rx.recv() {
        if embedder.is_none() && failed.is_none() {
            match (make.take().expect("made once"))() {
                Ok(e) => {
                    *cfg.lock().unwrap_or_else(|e| e.into_inner()) = Some(*e.config());
                    embedder = Some(e);
                }
                Err(e) => failed = Some(format!("this model cannot embed: {e:#}")),
            }
        }
        let result = match (&mut embedder, &failed) {
            (Some(e), _) => e.embed(&job.inputs, &job.opts).map_err(|e| match e {
                EmbedError::Model(_) | EmbedError::Backend(_) | EmbedError::Tokenizer(_) => {
                    WorkerError::Model(e.to_string())
                }
                other => WorkerError::Input(other),
            }),
            (None, Some(m)) => Err(WorkerError::Model(m.clone())),
            (None, None) => Err(WorkerError::Model("no embedder".into())),
        };
        let _ = job.reply.send(result);
    }
}
