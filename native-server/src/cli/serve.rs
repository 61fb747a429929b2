//! `weft serve`: the HTTP server (OpenAI `/v1`, Ollama `/api`, chat UI, ops routes).
//!
//! The listener starts first (so `/health` and `/ready` answer while the model loads: `/ready`
//! is 503 until it is loaded), then the model loads on a background thread and a scheduler
//! thread runs continuous batching over `--parallel` sequence slots. Ctrl-C / SIGTERM stops
//! taking requests, lets running streams finish, and exits.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use super::backend_args::BackendArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use weft_core::backend::KvDtype;
use weft_core::chat::ChatTemplate;
use weft_core::engine::{Engine, EngineConfig};
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::scheduler::{Scheduler, SchedulerConfig};
use weft_core::tokenizer::Tokenizer;

use crate::server::{self, Loaded, Precedence, SamplingFields, ServeConfig, Shared};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Path to a .gguf model.
    #[arg(long)]
    model: PathBuf,
    /// Address to listen on (loopback by default; use 0.0.0.0 to accept other machines).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 8080)]
    port: u16,
    #[command(flatten)]
    backend: BackendArgs,
    /// Context length per sequence, in tokens.
    #[arg(long, default_value_t = 4096)]
    ctx: usize,
    /// Sequences generated concurrently (KV-cache slots).
    #[arg(long, default_value_t = 4)]
    parallel: usize,
    /// Requests allowed to wait for a slot; beyond that, 429 with Retry-After.
    #[arg(long, default_value_t = 64)]
    queue: usize,
    /// Default and maximum tokens generated per request.
    #[arg(long, default_value_t = 2048)]
    max_tokens: usize,
    /// Most tokens per engine step (decode rows plus prompt chunks).
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Name clients use for the model (default: the file name without .gguf).
    #[arg(long)]
    alias: Option<String>,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    body_limit: usize,
    /// Operator sampling values (they win over request values unless
    /// --sampling-precedence request).
    #[arg(long)]
    temperature: Option<f32>,
    #[arg(long)]
    top_k: Option<i64>,
    #[arg(long)]
    top_p: Option<f32>,
    #[arg(long)]
    min_p: Option<f32>,
    #[arg(long)]
    repeat_penalty: Option<f32>,
    #[arg(long)]
    presence_penalty: Option<f32>,
    #[arg(long)]
    frequency_penalty: Option<f32>,
    #[arg(long)]
    seed: Option<i64>,
    /// Who wins when both the operator and a request set a sampling value.
    #[arg(long, value_enum, default_value_t = Precedence::Operator)]
    sampling_precedence: Precedence,
}

pub fn run(a: ServeArgs) -> Result<()> {
    a.backend.kind()?;
    if a.ctx < 16 || a.parallel == 0 || a.batch == 0 || a.queue == 0 {
        bail!("--ctx must be at least 16, and --parallel, --batch and --queue positive");
    }
    if !a.model.is_file() {
        bail!("model file {} does not exist", a.model.display());
    }
    let name = a.alias.clone().unwrap_or_else(|| {
        a.model
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into())
    });
    let cfg = ServeConfig {
        model_path: a.model.clone(),
        model_name: name,
        backend: a.backend.backend.clone(),
        n_ctx: a.ctx,
        parallel: a.parallel,
        max_tokens: a.max_tokens,
        queue: a.queue,
        body_limit: a.body_limit,
        sampling: SamplingFields {
            temperature: a.temperature,
            top_k: a.top_k,
            top_p: a.top_p,
            min_p: a.min_p,
            repeat_penalty: a.repeat_penalty,
            presence_penalty: a.presence_penalty,
            frequency_penalty: a.frequency_penalty,
            repeat_last_n: None,
            seed: a.seed,
        },
        precedence: a.sampling_precedence,
    };
    let state = server::state(cfg);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(serve(a, state))
}

async fn serve(a: ServeArgs, state: Shared) -> Result<()> {
    let addr: SocketAddr = format!("{}:{}", a.host, a.port)
        .parse()
        .with_context(|| format!("bad --host/--port {}:{}", a.host, a.port))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    eprintln!("weft: listening on http://{local} (model loading)");
    let st = state.clone();
    std::thread::spawn(move || match load(&a, &st) {
        Ok(l) => {
            let _ = st.loaded.set(l);
            eprintln!("weft: model loaded; ready");
        }
        Err(e) => {
            eprintln!("weft: error: model failed to load: {e:#}");
            let _ = st.load_error.set(format!("{e:#}"));
        }
    });
    let app = server::router(state.clone());
    let st = state.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            eprintln!("weft: shutting down: finishing running requests");
            if let Some(l) = st.loaded.get() {
                l.handle.shutdown();
            }
        })
        .await?;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// Opens the model, builds engine, tokenizer and template, and starts the scheduler thread.
fn load(a: &ServeArgs, st: &Shared) -> Result<Loaded> {
    let file = Arc::new(ModelFile::open(&a.model).with_context(|| a.model.display().to_string())?);
    let tokenizer = Arc::new(Tokenizer::from_gguf(&file.gguf)?);
    let template = match ChatTemplate::from_gguf(&file.gguf) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("weft: no chat template ({e}); chat endpoints will answer 400");
            None
        }
    };
    let backend = a.backend.create()?;
    let cfg = EngineConfig {
        kv: KvCacheConfig {
            n_ctx: a.ctx,
            n_seq: a.parallel,
            dtype: KvDtype::F16,
        },
        max_batch: a.batch,
    };
    let engine = Engine::load(file.clone(), backend, cfg, &mut |_, _| {})?;
    let info = engine.model_info().clone();
    let (sched, handle) = Scheduler::new(
        engine,
        tokenizer.clone(),
        SchedulerConfig {
            queue: a.queue,
            step_tokens: a.batch,
        },
    )?;
    std::thread::Builder::new()
        .name("weft-scheduler".into())
        .spawn(move || sched.run())?;
    let g = &file.gguf;
    let n_params = g.tensors.iter().map(|t| t.n_elements).sum();
    let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
    for t in g.tensors.iter().filter(|t| t.dims.len() >= 2) {
        *counts.entry(t.ty.name().to_string()).or_default() += t.n_elements;
    }
    let quantization = counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(k, _)| k)
        .unwrap_or_default();
    let _ = st;
    Ok(Loaded {
        handle,
        tokenizer,
        template,
        info,
        file_size: std::fs::metadata(&a.model).map(|m| m.len()).unwrap_or(0),
        quantization,
        n_params,
    })
}
