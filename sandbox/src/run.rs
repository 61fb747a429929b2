//! One run: a fresh store with its own WASI context, limits and captured output, the workspace
//! preopened read-write as `/workspace` and nothing else.

use std::time::{Duration, Instant};

use wasmtime::{ResourceLimiter, Store, Trap};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use crate::engine::Sandbox;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::output::{CappedOutput, OVERFLOW_TRAP};
use crate::quota::wasi::HasQuota;
use crate::quota::Quota;
use crate::runtimes::Language;
use crate::workspace::paths::{self, GUEST_ROOT};
use crate::workspace::{Changes, Workspace};

/// What to run.
#[derive(Clone, Debug)]
pub enum Source {
    /// Source code given inline (the model's `code` argument).
    Code(String),
    /// A script in the workspace, by workspace-relative path.
    File(String),
}

/// One run request.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// Python or JavaScript.
    pub language: Language,
    /// The code.
    pub source: Source,
    /// Arguments after the script (`sys.argv[1:]`, `scriptArgs.slice(1)`).
    pub args: Vec<String>,
    /// Resource limits.
    pub limits: Limits,
}

impl RunRequest {
    /// Inline code with default limits.
    pub fn code(language: Language, code: impl Into<String>) -> Self {
        RunRequest {
            language,
            source: Source::Code(code.into()),
            args: Vec::new(),
            limits: Limits::default(),
        }
    }
}

/// Why a run stopped before the guest exited by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The fuel (CPU) budget ran out.
    CpuLimit,
    /// The wall-clock timeout passed.
    Timeout,
    /// stdout or stderr passed its cap.
    OutputLimit,
    /// The guest trapped (stack overflow, `unreachable`, ...): see the error.
    Trap,
}

/// What a run did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunOutcome {
    /// The guest's exit status, when it exited (0 on success).
    pub exit_code: Option<i32>,
    /// Set when the host stopped the guest.
    pub stopped: Option<Stop>,
    /// A one-line explanation when the run did not succeed, fit to show to a model or a user.
    pub error: Option<String>,
    /// Captured stdout (lossy UTF-8), at most the cap.
    pub stdout: String,
    /// Captured stderr (lossy UTF-8), at most the cap.
    pub stderr: String,
    /// True when stdout passed its cap (and was cut).
    pub stdout_truncated: bool,
    /// True when stderr passed its cap (and was cut).
    pub stderr_truncated: bool,
    /// True when a memory growth was refused at the memory limit.
    pub memory_limit_hit: bool,
    /// True when a file write or creation was refused at the file limits.
    pub file_limit_hit: bool,
    /// Files the run created, changed and deleted in its workspace.
    pub files: Changes,
    /// Fuel units used.
    pub fuel_used: u64,
    /// Largest linear memory the guest reached, in bytes.
    pub memory_peak: u64,
    /// Wall time of the whole run (instantiation included), in seconds.
    pub seconds: f64,
}

impl RunOutcome {
    /// True when the guest exited with status 0 and was not stopped.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && self.stopped.is_none()
    }
}

/// Refuses memory growth past the cap (the guest sees a failed `memory.grow`, so Python raises
/// `MemoryError`) and remembers that it did.
struct MemoryLimiter {
    max: usize,
    peak: usize,
    refused: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max {
            self.refused = true;
            return Ok(false);
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// A store's data.
pub(crate) struct State {
    pub(crate) wasi: WasiP1Ctx,
    limiter: MemoryLimiter,
    quota: Quota,
}

impl HasQuota for State {
    fn quota(&mut self) -> &mut Quota {
        &mut self.quota
    }

    fn wasi(&mut self) -> &mut WasiP1Ctx {
        &mut self.wasi
    }
}

/// Python: change to the workspace, then compile and run the code (inline or from a file) in
/// fresh globals as `__main__`, so tracebacks show the user's own line numbers.
const PYTHON_BOOT: &str = "import sys as _s,os as _o
_o.chdir('/workspace')
_m,_t=_s.argv[1],_s.argv[2]
_n=_t if _m=='file' else '<main.py>'
_s.argv=[_t if _m=='file' else 'main.py']+_s.argv[3:]
_c=compile(open(_t,encoding='utf-8').read() if _m=='file' else _t,_n,'exec')
_g={'__name__':'__main__','__builtins__':__builtins__}
if _m=='file':_g['__file__']=_t
del _s,_o,_m,_t,_n
exec(_c,_g)
";

fn argv(req: &RunRequest) -> Result<Vec<String>> {
    let (mode, text) = match &req.source {
        Source::Code(c) => ("code", c.clone()),
        Source::File(p) => {
            let rel = paths::relative(p, false)?;
            ("file", format!("{GUEST_ROOT}/{}", paths::display(&rel)))
        }
    };
    let mut v: Vec<String> = match req.language {
        Language::Python => ["python", "-I", "-X", "utf8", "-c", PYTHON_BOOT, mode]
            .map(String::from)
            .to_vec(),
        Language::Javascript => {
            // qjs evaluates `-e` as a script with std and os as globals; change directory in
            // the same first line so the user's line numbers are unchanged.
            // The argument after the expression becomes scriptArgs[0], as a script's name would.
            let prelude = "os.chdir('/workspace');";
            let (body, name) = match mode {
                "file" => (
                    format!("{prelude}std.loadScript({});", js_string(&text)),
                    text,
                ),
                _ => (format!("{prelude}{text}"), "main.js".to_string()),
            };
            return Ok(["qjs", "--std", "-e", &body, &name]
                .into_iter()
                .map(String::from)
                .chain(req.args.iter().cloned())
                .collect());
        }
    };
    v.push(text);
    v.extend(req.args.iter().cloned());
    Ok(v)
}

/// A JavaScript string literal.
fn js_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

impl Sandbox {
    /// Runs code in `workspace` under `req.limits`. Blocking: from async code call it through
    /// `tokio::task::spawn_blocking`. A guest failure (exception, limit, trap) is a normal
    /// [`RunOutcome`]; an `Err` means the request was bad or the host failed.
    pub fn run(&self, workspace: &Workspace, req: &RunRequest) -> Result<RunOutcome> {
        req.limits.validate()?;
        if let Source::File(p) = &req.source {
            let rel = workspace.resolve(p)?;
            workspace
                .dir()
                .metadata(&rel)
                .map_err(|e| crate::workspace::io_error(&rel, "opening", e))?;
        }
        let module = self.module(req.language)?;
        let limits = &req.limits;
        let before = workspace.snapshot();
        let stdout = CappedOutput::new(limits.stdout_bytes);
        let stderr = CappedOutput::new(limits.stderr_bytes);
        let mut b = WasiCtxBuilder::new();
        b.args(&argv(req)?)
            .envs(&[
                ("HOME", GUEST_ROOT),
                ("LANG", "C.UTF-8"),
                ("PWD", GUEST_ROOT),
            ])
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_blocking_current_thread(true)
            .preopened_dir(workspace.path(), GUEST_ROOT, FsPerms::ReadWrite)
            .map_err(|e| Error::Wasmtime(format!("preopening the workspace: {e:#}")))?;
        let state = State {
            wasi: b.build_p1(),
            limiter: MemoryLimiter {
                max: usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX),
                peak: 0,
                refused: false,
            },
            quota: quota_for(limits, &before),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_fuel(limits.fuel)?;
        store.epoch_deadline_async_yield_and_update(1);

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| Error::io("starting the sandbox's runtime", e))?;
        let t0 = Instant::now();
        let linker = &self.linker;
        let result = rt.block_on(async {
            tokio::time::timeout(limits.timeout, async {
                let instance = linker.instantiate_async(&mut store, &module).await?;
                let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
                start.call_async(&mut store, ()).await
            })
            .await
        });
        let seconds = t0.elapsed().as_secs_f64();
        drop(rt);

        let (mut exit_code, mut stopped, mut error) = (None, None, None);
        match result {
            Err(_elapsed) => {
                stopped = Some(Stop::Timeout);
                error = Some(format!(
                    "stopped: wall-clock timeout of {} reached",
                    fmt_duration(limits.timeout)
                ));
            }
            Ok(Ok(())) => exit_code = Some(0),
            Ok(Err(e)) => {
                if let Some(exit) = e.downcast_ref::<I32Exit>() {
                    exit_code = Some(exit.0);
                } else if e.downcast_ref::<Trap>() == Some(&Trap::OutOfFuel) {
                    stopped = Some(Stop::CpuLimit);
                    error = Some(format!(
                        "stopped: CPU limit reached ({} fuel units)",
                        limits.fuel
                    ));
                } else if stdout.overflowed()
                    || stderr.overflowed()
                    || format!("{e:#}").contains(OVERFLOW_TRAP)
                {
                    stopped = Some(Stop::OutputLimit);
                } else {
                    stopped = Some(Stop::Trap);
                    error = Some(format!("the guest trapped: {}", first_line(&e)));
                }
            }
        }
        let (so, se) = (stdout.overflowed(), stderr.overflowed());
        if so || se {
            stopped = Some(Stop::OutputLimit);
            let which = if so { "stdout" } else { "stderr" };
            let cap = if so {
                limits.stdout_bytes
            } else {
                limits.stderr_bytes
            };
            error = Some(format!(
                "stopped: {which} passed its limit of {cap} bytes (output cut there)"
            ));
        }
        let fuel_used = limits.fuel - store.get_fuel().unwrap_or(0);
        let data = store.data();
        let memory_limit_hit = data.limiter.refused;
        let file_limit_hit = data.quota.hit;
        let memory_peak = data.limiter.peak as u64;
        if error.is_none() && exit_code != Some(0) {
            if memory_limit_hit {
                error = Some(format!(
                    "memory limit of {} MiB reached (an allocation failed)",
                    limits.memory_bytes >> 20
                ));
            } else if file_limit_hit {
                error = Some(quota_message(limits));
            } else if let Some(code) = exit_code {
                error = Some(format!("exited with status {code}"));
            }
        }
        drop(store);
        let files = before.changes(&workspace.snapshot());
        Ok(RunOutcome {
            exit_code,
            stopped,
            error,
            stdout: String::from_utf8_lossy(&stdout.contents()).into_owned(),
            stderr: String::from_utf8_lossy(&stderr.contents()).into_owned(),
            stdout_truncated: so,
            stderr_truncated: se,
            memory_limit_hit,
            file_limit_hit,
            files,
            fuel_used,
            memory_peak,
            seconds,
        })
    }
}

/// The run's quota: its limits, less what the workspace already holds when that counts.
fn quota_for(limits: &Limits, before: &crate::workspace::Snapshot) -> Quota {
    if !limits.whole_workspace {
        return Quota::new(limits.file_bytes, limits.files_created);
    }
    Quota::new(
        limits.file_bytes.saturating_sub(before.bytes()),
        limits.files_created.saturating_sub(before.entries()),
    )
}

/// Why a run was refused a write, a resize or a new entry.
pub(crate) fn quota_message(limits: &Limits) -> String {
    format!(
        "workspace quota reached: {} bytes in files (writes, truncate to a larger size and \
         gaps left by writing past the end all count) and {} entries (files, directories, \
         symlinks, hard links){}",
        limits.file_bytes,
        limits.files_created,
        if limits.whole_workspace {
            " for the whole workspace"
        } else {
            " added per run"
        }
    )
}

/// The innermost cause of a trap (wasmtime puts the wasm backtrace in the outer message).
fn first_line(e: &wasmtime::Error) -> String {
    let s = e.root_cause().to_string();
    s.lines().next().unwrap_or("").to_string()
}

fn fmt_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}
