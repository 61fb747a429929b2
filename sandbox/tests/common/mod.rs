//! Shared by the sandbox's integration tests: one sandbox per test binary (compiled code comes
//! from the `.cwasm` cache after the first run), and runs with small limits.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use weft_sandbox::{Language, Limits, RunOutcome, RunRequest, Sandbox, Source, Workspace};

/// The shared sandbox, or None (after a loud skip message) when the runtimes are absent
/// outside CI.
pub fn sandbox(test: &str) -> Option<Arc<Sandbox>> {
    static SANDBOX: OnceLock<Arc<Sandbox>> = OnceLock::new();
    if !weft_sandbox::test_support::runtimes_present(test) {
        return None;
    }
    Some(
        SANDBOX
            .get_or_init(|| Arc::new(Sandbox::from_env().expect("creating the sandbox")))
            .clone(),
    )
}

/// Limits small enough that abuse tests end quickly.
pub fn small_limits() -> Limits {
    Limits {
        fuel: 4_000_000_000,
        memory_bytes: 256 << 20,
        timeout: Duration::from_secs(60),
        stdout_bytes: 64 << 10,
        stderr_bytes: 64 << 10,
        file_bytes: 1 << 20,
        files_created: 50,
        whole_workspace: true,
    }
}

/// Runs inline code in `ws`.
pub fn run_in(
    sb: &Sandbox,
    ws: &Workspace,
    lang: Language,
    code: &str,
    limits: Limits,
) -> RunOutcome {
    sb.run(
        ws,
        &RunRequest {
            language: lang,
            source: Source::Code(code.to_string()),
            args: Vec::new(),
            limits,
        },
    )
    .expect("the run itself works")
}

/// Runs inline Python in a fresh workspace with small limits.
pub fn py(sb: &Sandbox, code: &str) -> (RunOutcome, Workspace) {
    let ws = Workspace::temporary().unwrap();
    let out = run_in(sb, &ws, Language::Python, code, small_limits());
    (out, ws)
}
