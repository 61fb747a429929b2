//! Long work (pull, import, convert, quantize) as jobs: each has an id, a kind, a phase,
//! progress, start and end times, and a final status with its error. Jobs run on the runner's
//! own threads (at most `parallel` at once, so inference never waits on them), outlive the
//! request that started them, and can be cancelled; the work itself removes its partial files
//! when it fails or is cancelled.
//!
//! Jobs are kept behind [`JobStore`]: in memory ([`MemoryJobs`]), which the server wraps to
//! copy every job into its admin storage (`server/jobs/persist.rs`).
//!
//! Files: `store.rs` (the job record and the storage trait), `runner.rs` (the threads).

mod runner;
mod store;

pub use runner::{JobContext, JobRunner, Work};
pub use store::{now, Job, JobKind, JobProgress, JobStatus, JobStore, MemoryJobs, ProgressUnit};
