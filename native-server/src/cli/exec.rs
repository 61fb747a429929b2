//! `weft exec`: run a Python or JavaScript file in the wasmtime sandbox, with the current
//! directory as its workspace (`/workspace` inside), for people to try and for tests.

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
    let sandbox = Sandbox::from_env()?;
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
