//! `weft serve`: the HTTP server (OpenAI `/v1`, Ollama `/api`, chat UI, ops routes) over a
//! registry of models known by name.
//!
//! This file only turns flags into the server library's values (`server::Builder`); how the
//! server runs, drains and stops is in `server/serve.rs`. After `POST /api/v1/restart` has
//! drained, it re-executes this binary with the same arguments on the same port: one process
//! image replaced by a fresh one, so nothing in memory needs resetting.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use super::backend_args::BackendArgs;
use anyhow::{bail, Context, Result};
use clap::Args;

use crate::registry::{
    available_memory, parse_size, Catalog, KeepAlive, LoadConfig, Registry, RegistryConfig, Slots,
    AUTO_KV_SHARE,
};
use crate::server::logging::{self, LogFormat};
use crate::server::{self, Precedence, SamplingFields, ServeConfig};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// A .gguf model to serve, as PATH or NAME=PATH (repeatable; the first is the default
    /// model, loaded at start-up). The name defaults to the file name without .gguf.
    #[arg(long = "model", value_name = "[NAME=]PATH")]
    models: Vec<String>,
    /// A vision projector (an mmproj GGUF, as llama.cpp's converter writes) for the default
    /// model: images on the chat APIs. Without it, a model takes the mmproj*.gguf beside it
    /// that fits (docs/vision.md).
    #[arg(long, value_name = "FILE")]
    mmproj: Option<PathBuf>,
    /// Most images in one request.
    #[arg(long, default_value_t = 8)]
    max_images: usize,
    /// Most image bytes (as sent, decoded from base64) in one request, e.g. 16MiB.
    #[arg(long, default_value = "16MiB")]
    max_image_bytes: String,
    /// Largest image, in pixels (width x height), read from its header before decoding.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    max_image_pixels: u64,
    /// A directory whose *.gguf files are served too (by file name), and where names made by
    /// clients (/api/create, /api/copy, aliases) are saved.
    #[arg(long)]
    models_dir: Option<PathBuf>,
    /// Most models loaded at once; loading another unloads the least recently used idle one.
    #[arg(long, default_value_t = 3)]
    max_loaded: usize,
    /// Memory the loaded models may use together (e.g. 8GiB; default: 90% of the memory
    /// available at start-up). Each model counts its file size plus its KV cache.
    #[arg(long)]
    memory_budget: Option<String>,
    /// How long a model stays loaded after its last request when the request does not say
    /// (Ollama keep_alive: "5m", "1h", 0 = unload at once, -1 = until evicted).
    #[arg(long, default_value = "5m", allow_hyphen_values = true)]
    keep_alive: String,
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
    /// Sequences generated concurrently per model: a number (each with a full context in the
    /// KV pool unless --kv-size is given), or `auto`: a pool of as many positions as fit an
    /// eighth of the memory budget, shared by one sequence per 512 of them, at most 64.
    #[arg(long, default_value = "auto")]
    parallel: String,
    /// Positions in each model's KV block pool, shared by its sequences (at least --ctx).
    /// Default: sized by --parallel.
    #[arg(long)]
    kv_size: Option<usize>,
    /// Requests allowed to wait for a slot; beyond that, 429 with Retry-After.
    #[arg(long, default_value_t = 64)]
    queue: usize,
    /// Default and maximum tokens generated per request.
    #[arg(long, default_value_t = 2048)]
    max_tokens: usize,
    /// Most tokens per engine step (decode rows plus prompt chunks).
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Name clients use for the first --model (same as --model NAME=PATH).
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
    /// Base URL hf.co/... pull references resolve against.
    #[arg(long, env = "WEFT_HF_ENDPOINT", default_value = crate::store::DEFAULT_HF_ENDPOINT)]
    hf_endpoint: String,
    /// A folder clients may import models from (repeatable; the models folder always is).
    #[arg(long = "import-root", value_name = "DIR")]
    import_roots: Vec<PathBuf>,
    /// Model jobs (pull, import, quantize) run at once.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Who wins when both the operator and a request set a sampling value.
    #[arg(long, value_enum, default_value_t = Precedence::Operator)]
    sampling_precedence: Precedence,
    /// Log lines as text or one JSON object per line (stderr).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Let models run Python and JavaScript in the wasmtime sandbox (the runtimes come from
    /// scripts/fetch-sandbox.sh).
    #[arg(long)]
    code_exec: bool,
    /// Sandbox runs at once with --code-exec (default: one per CPU core); a request that may
    /// run code while all are taken gets 429 with Retry-After.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    sandbox_runs: Option<u32>,
    /// A folder of agent skills (subfolders with a SKILL.md), served read-only besides the
    /// installed ones in $WEFT_HOME/skills (repeatable).
    #[arg(long = "skills-dir", value_name = "DIR")]
    skills_dirs: Vec<PathBuf>,
    /// Where chat-UI uploads are stored (default: $WEFT_HOME/uploads).
    #[arg(long)]
    uploads_dir: Option<PathBuf>,
    /// Largest uploaded file, e.g. 20MiB.
    #[arg(long, default_value = "20MiB")]
    upload_max_file: String,
    /// Largest total of the files in one upload request, e.g. 50MiB.
    #[arg(long, default_value = "50MiB")]
    upload_max_request: String,
    /// Where keys, users, tenants, settings and the audit log are kept: a SQLite file
    /// (`sqlite://PATH` or a path; default $WEFT_HOME/weft.db) or `postgres://USER@HOST:PORT/DB`
    /// for several servers sharing them.
    #[arg(long, env = "WEFT_DATABASE")]
    database: Option<String>,
    /// Listen on a non-loopback address although no API key exists: anyone who reaches the
    /// server may use and administer it until a key is created.
    #[arg(long)]
    insecure_no_auth: bool,
    /// A host name (or NAME:PORT) clients may reach this server by, besides localhost,
    /// 127.0.0.1, [::1] and the --host address (repeatable; `*`: any name). Other `Host`
    /// headers are refused (DNS rebinding).
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// A web origin (scheme://host[:port]) whose pages may call this server (repeatable;
    /// `*`: any origin). Without it CORS is off and browsers may change state only from the
    /// server's own pages.
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
    /// Which log events to write: a level (error, warn, info, debug, trace) or an env-filter
    /// directive; RUST_LOG wins when set.
    #[arg(long, default_value = "info")]
    log_level: String,
    #[command(flatten)]
    bounds: super::bounds_args::BoundsArgs,
    /// Video models (the first --model a diffusers Wan folder): the width in pixels when a
    /// request names none (default 832).
    #[arg(long)]
    video_width: Option<usize>,
    /// The height when a request names none (default 480).
    #[arg(long)]
    video_height: Option<usize>,
    /// Frames when a request names none (snapped to 4k+1; default 33).
    #[arg(long)]
    video_frames: Option<usize>,
    /// Denoising steps when a request names none (default: the model's recipe).
    #[arg(long)]
    video_steps: Option<usize>,
    /// Frames per second of generated videos when a request names none (default 16).
    #[arg(long)]
    fps: Option<u32>,
    /// The video model's UMT5 text encoder (a folder; the UMT5 GGUF for a GGUF model), when
    /// not in or beside the model.
    #[arg(long)]
    video_text_encoder: Option<PathBuf>,
    /// The video model's tokenizer folder (or tokenizer.json); a GGUF model's UMT5 file
    /// embeds one.
    #[arg(long)]
    video_tokenizer: Option<PathBuf>,
    /// The video model's VAE (a folder, or Wan-named safetensors such as
    /// wan_2.1_vae.safetensors).
    #[arg(long)]
    video_vae: Option<PathBuf>,
}

/// The video model of `--model`, when its first value is one: loaded, with the defaults the
/// flags set, and its name. It is removed from `models` (the text-model catalog).
fn take_video_model(
    a: &ServeArgs,
    models: &mut Vec<String>,
) -> Result<Option<(weft_core::diffusion::WanPipeline, String, u32)>> {
    let Some(first) = models.first() else {
        return Ok(None);
    };
    let (name, path) = match first.split_once('=') {
        Some((n, p)) if !n.is_empty() && !n.contains('/') => (Some(n.to_string()), p),
        _ => (None, first.as_str()),
    };
    let path = PathBuf::from(path);
    if !crate::video_gen::is_video_model(&path) {
        return Ok(None);
    }
    let companions = weft_core::diffusion::Companions {
        text_encoder: a.video_text_encoder.clone(),
        tokenizer: a.video_tokenizer.clone(),
        vae: a.video_vae.clone(),
    };
    let mut pipeline = crate::video_gen::load_video_model(&path, &companions)?;
    let r = &mut pipeline.recipe;
    for (flag, v, slot) in [
        ("--video-width", a.video_width, &mut r.width),
        ("--video-height", a.video_height, &mut r.height),
        ("--video-frames", a.video_frames, &mut r.frames),
        ("--video-steps", a.video_steps, &mut r.steps),
    ] {
        match v {
            Some(0) => bail!("{flag} must be positive"),
            Some(n) => *slot = n,
            None => {}
        }
    }
    let fps = a.fps.unwrap_or(r.fps);
    if !(1..=120).contains(&fps) {
        bail!("--fps must be between 1 and 120");
    }
    // The defaults must themselves be a valid request.
    pipeline
        .settings(&weft_core::diffusion::VideoRequest::default())
        .map(drop)
        .or_else(|e| match e {
            // An image-to-video model needs an image in every request; sizes still apply.
            weft_core::diffusion::VideoError::Request(m) if m.contains("needs an image") => Ok(()),
            e => Err(e),
        })
        .map_err(|e| anyhow::anyhow!("the video defaults: {e}"))?;
    let name = name.or(a.alias.clone()).unwrap_or_else(|| {
        path.file_name()
            .map_or("video".into(), |f| f.to_string_lossy().into_owned())
    });
    models.remove(0);
    Ok(Some((pipeline, name, fps)))
}

pub fn run(a: ServeArgs) -> Result<()> {
    let mut text_models = a.models.clone();
    let video = take_video_model(&a, &mut text_models)?;
    a.backend.check()?;
    logging::init(a.log_format, &a.log_level);
    super::bounds_args::private_home();
    let parallel = match a.parallel.as_str() {
        "auto" => None,
        n => Some(n.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
            anyhow::anyhow!("--parallel must be a positive number or auto, not {n:?}")
        })?),
    };
    let site = server::SiteConfig::new(&a.allowed_hosts, &a.cors_origins, a.host.parse().ok())
        .map_err(anyhow::Error::msg)?;
    if a.ctx < 16 || a.batch == 0 || a.queue == 0 || a.max_loaded == 0 {
        bail!("--ctx must be at least 16, and --batch, --queue and --max-loaded positive");
    }
    // The store ($WEFT_HOME/models) unless --models-dir or --model say otherwise.
    let store_dir = match &a.models_dir {
        Some(d) => Some(d.clone()),
        None if a.models.is_empty() => Some(
            crate::store::Store::open(None)
                .map_err(|e| anyhow::anyhow!(e.message))?
                .dir,
        ),
        None => None,
    };
    let mut models = Vec::new();
    for (i, m) in text_models.iter().enumerate() {
        let (name, path) = match m.split_once('=') {
            Some((n, p)) if !n.is_empty() && !n.contains('/') => (Some(n.to_string()), p),
            _ => (None, m.as_str()),
        };
        let name = if i == 0 {
            name.or(a.alias.clone())
        } else {
            name
        };
        models.push((name, PathBuf::from(path)));
    }
    let mut catalog = Catalog::new(&models, store_dir.as_deref())?;
    if let Some(p) = &a.mmproj {
        catalog.set_default_projector(p)?;
    }
    let keep_alive = KeepAlive::parse(&a.keep_alive).map_err(|e| anyhow::anyhow!(e.to_string()))?;
    let memory_budget = match &a.memory_budget {
        Some(s) => parse_size(s).map_err(anyhow::Error::msg)?,
        None => available_memory().map(|m| m / 10 * 9).unwrap_or(u64::MAX),
    };
    let parallel = match parallel {
        Some(n) => Slots::Fixed(n),
        None => Slots::Auto {
            kv_budget: memory_budget / AUTO_KV_SHARE,
        },
    };
    let backend = a.backend.clone();
    let load = LoadConfig {
        backend: Arc::new(move || backend.create()),
        n_ctx: a.ctx,
        parallel,
        kv_size: a.kv_size,
        batch: a.batch,
        queue: a.queue,
    };
    // What the UI's status reports: the default model's slots.
    let default_slots = catalog
        .default_name()
        .and_then(|n| catalog.resolve(n).ok())
        .map(|r| load.slots(&r.facts))
        .unwrap_or(1);
    let registry = Registry::new(
        catalog,
        RegistryConfig {
            load,
            max_loaded: a.max_loaded,
            memory_budget,
            keep_alive,
        },
    );
    let home = crate::store::weft_home()
        .context("no home folder for skills, artifacts and uploads: set WEFT_HOME or HOME")?;
    let mut uploads = server::uploads::UploadConfig::new(
        a.uploads_dir
            .clone()
            .unwrap_or_else(|| home.join("uploads")),
    );
    let size = |flag: &str, v: &str| -> Result<usize> {
        let n = parse_size(v).map_err(|e| anyhow::anyhow!("{flag} {v:?}: {e}"))?;
        if n == 0 {
            bail!("{flag} must be more than 0");
        }
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    };
    uploads.max_file = size("--upload-max-file", &a.upload_max_file)?;
    uploads.max_request = size("--upload-max-request", &a.upload_max_request)?;
    uploads.max_files = a.bounds.upload_max_files.max(1);
    uploads.pdf.max_render_pages = a.bounds.pdf_max_pages as usize;
    uploads.pdf.max_image_pixels = a.max_image_pixels.max(1);
    let cfg = ServeConfig {
        backend: a.backend.backend.clone(),
        n_ctx: a.ctx,
        parallel: default_slots,
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
        uploads,
        site,
        images: server::ImageLimits {
            max_images: a.max_images,
            max_bytes: size("--max-image-bytes", &a.max_image_bytes)?,
            max_pixels: a.max_image_pixels.max(1),
        },
    };
    let store = match &store_dir {
        Some(d) => Some(
            crate::store::Store::open(Some(d))
                .and_then(|s| s.with_import_roots(&a.import_roots))
                .map_err(|e| anyhow::anyhow!(e.message))?
                .with_hf_endpoint(&a.hf_endpoint)
                .with_pull_policy(a.bounds.pull_policy()),
        ),
        None => None,
    };
    for d in &a.skills_dirs {
        if !d.is_dir() {
            bail!("--skills-dir {}: not a folder", d.display());
        }
    }
    let mut code = server::code::CodeTools::new(&home, a.skills_dirs.clone(), a.code_exec)
        .context("setting up code execution and skills")?;
    if let Some(n) = a.sandbox_runs {
        code = code.with_run_slots(n as usize);
    }
    let addr: SocketAddr = format!("{}:{}", a.host, a.port)
        .parse()
        .with_context(|| format!("bad --host/--port {}:{}", a.host, a.port))?;
    let url = super::keys::database_url(a.database.as_deref())?;
    let mut builder = server::Builder::new(cfg, registry, code, addr, url)
        .admin_key(std::env::var("WEFT_ADMIN_KEY").ok())
        .insecure_no_auth(a.insecure_no_auth);
    if let Some(store) = store {
        builder = builder.models_store(store, a.jobs);
    }
    if let Some((pipeline, name, fps)) = video {
        builder = builder.video(pipeline, name, fps);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let exit = rt.block_on(async move { builder.build().await?.run().await })?;
    match exit {
        server::Exit::Stopped => Ok(()),
        server::Exit::Restart(port) => {
            // Threads the runtime still runs (the drain timed out) die with the exec.
            rt.shutdown_timeout(std::time::Duration::from_secs(1));
            Err(reexec(port))
        }
    }
}

/// Replaces this process with a fresh `weft` run with the same arguments and environment,
/// `--port` set to the port it listened on (so `--port 0` keeps its address). Returns only
/// on failure.
#[cfg(unix)]
fn reexec(port: u16) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return anyhow::anyhow!("restart: finding this program: {e}"),
    };
    let args = with_port(std::env::args_os().skip(1).collect(), port);
    tracing::info!(exe = %exe.display(), "restarting");
    let e = std::process::Command::new(&exe).args(args).exec();
    anyhow::anyhow!("restart: running {} again: {e}", exe.display())
}

#[cfg(not(unix))]
fn reexec(_port: u16) -> anyhow::Error {
    anyhow::anyhow!("restart: re-executing is only supported on Unix; start weft serve again")
}

/// `args` with `--port` (either form) set to `port`, added when absent.
fn with_port(args: Vec<std::ffi::OsString>, port: u16) -> Vec<std::ffi::OsString> {
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut it = args.into_iter();
    let mut set = false;
    while let Some(a) = it.next() {
        if a == "--port" {
            it.next();
        } else if a.to_str().is_some_and(|s| s.starts_with("--port=")) {
        } else if a == "--" {
            out.push(a);
            out.extend(it.by_ref());
            break;
        } else {
            out.push(a);
            continue;
        }
        if !set {
            out.push("--port".into());
            out.push(port.to_string().into());
            set = true;
        }
    }
    if !set {
        out.push("--port".into());
        out.push(port.to_string().into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::with_port;

    fn args(a: &[&str]) -> Vec<std::ffi::OsString> {
        a.iter().map(Into::into).collect()
    }

    #[test]
    fn restart_keeps_the_port() {
        let p = |a: &[&str]| with_port(args(a), 4321);
        assert_eq!(
            p(&["serve", "--port", "0", "--ctx", "512"]),
            args(&["serve", "--port", "4321", "--ctx", "512"])
        );
        assert_eq!(
            p(&["serve", "--port=0"]),
            args(&["serve", "--port", "4321"])
        );
        assert_eq!(p(&["serve"]), args(&["serve", "--port", "4321"]));
    }
}
