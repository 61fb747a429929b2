//! Per-run resource limits.

use std::time::Duration;

use crate::error::{Error, Result};

/// What one run may use. Every limit is enforced inside wasmtime or at the WASI boundary; none
/// relies on the guest behaving.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// CPU budget in wasmtime fuel units (about one per wasm instruction). Python's start-up
    /// costs roughly 0.1 G of it.
    pub fuel: u64,
    /// Linear-memory cap in bytes; a growth past it fails (Python raises `MemoryError`).
    pub memory_bytes: u64,
    /// Wall-clock limit for the whole run, also while the guest sleeps or waits on I/O.
    pub timeout: Duration,
    /// Bytes of stdout kept; writing more stops the run.
    pub stdout_bytes: usize,
    /// Bytes of stderr kept; writing more stops the run.
    pub stderr_bytes: usize,
    /// Bytes the run may add to files in its workspace: every byte written (overwrites
    /// included), the gap a write past the end of a file leaves (a sparse file counts at its
    /// logical length) and the growth of `truncate` / set-size. A call past it fails with
    /// "no space left on device".
    pub file_bytes: u64,
    /// Directory entries the run may create: files, directories, symlinks and hard links;
    /// past it creation fails the same way.
    pub files_created: u64,
    /// When true, what the workspace already holds counts against `file_bytes` and
    /// `files_created`, so a workspace kept across runs (a chat session's) never holds more
    /// than the quota. False for a folder the user runs in (`weft exec`): then only what the
    /// run adds counts.
    pub whole_workspace: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: 40_000_000_000,
            memory_bytes: 512 << 20,
            timeout: Duration::from_secs(30),
            stdout_bytes: 1 << 20,
            stderr_bytes: 256 << 10,
            file_bytes: 64 << 20,
            files_created: 1000,
            whole_workspace: true,
        }
    }
}

impl Limits {
    /// The smallest memory cap accepted: CPython needs about 10 MB to start.
    pub const MIN_MEMORY_BYTES: u64 = 1 << 20;
    /// The largest memory cap: wasm32's address space.
    pub const MAX_MEMORY_BYTES: u64 = 4 << 30;

    /// Checks the limits are usable.
    pub fn validate(&self) -> Result<()> {
        if self.fuel == 0 {
            return Err(Error::Limit("fuel must be positive".into()));
        }
        if !(Self::MIN_MEMORY_BYTES..=Self::MAX_MEMORY_BYTES).contains(&self.memory_bytes) {
            return Err(Error::Limit(format!(
                "memory must be between 1 MiB and 4 GiB, got {} bytes",
                self.memory_bytes
            )));
        }
        if self.timeout.is_zero() {
            return Err(Error::Limit("timeout must be positive".into()));
        }
        Ok(())
    }

    /// The same limits with a wall-clock timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same limits with a memory cap in MiB.
    pub fn with_memory_mib(mut self, mib: u64) -> Self {
        self.memory_bytes = mib.saturating_mul(1 << 20);
        self
    }
}
