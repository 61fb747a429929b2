//! The job record and where jobs are kept.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    Pull,
    Import,
    Convert,
    Quantize,
    /// A video generation (the server's video routes).
    Video,
}

/// Where a job is in its life. Only `Queued` and `Running` change again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl JobStatus {
    /// Whether the job has ended.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

/// What progress counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressUnit {
    Bytes,
    Tensors,
    /// Denoising steps (and the other phases of a generation, each 0 then 1 of 1).
    Steps,
}

/// How far a job is.
#[derive(Clone, Debug, Serialize)]
pub struct JobProgress {
    pub unit: ProgressUnit,
    pub done: u64,
    /// 0 while unknown (e.g. before a download's size is known).
    pub total: u64,
    /// `done / total` in percent, 0 while the total is unknown.
    pub percent: f64,
}

/// One job, as the routes show it.
#[derive(Clone, Debug, Serialize)]
pub struct Job {
    pub id: String,
    pub kind: JobKind,
    pub status: JobStatus,
    /// What it is doing now (`queued`, `downloading`, `verifying`, `quantizing`, `done` ...).
    pub phase: String,
    pub progress: JobProgress,
    /// The request that started it.
    pub request: Value,
    /// Live facts of the work (e.g. a download's sha256), as it finds them.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub detail: serde_json::Map<String, Value>,
    /// What it made (e.g. the model's name and file), once succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Unix seconds.
    pub created_at: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<f64>,
    /// Someone asked, through another replica, that the job stop; its owner will.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cancel_requested: bool,
    /// The principal that asked for it (a key id, `env`, `open`; empty for a job no request
    /// made): only it sees the job.
    #[serde(default)]
    pub owner: String,
    /// Bumped on every change, so watchers can wait for the next one.
    #[serde(skip)]
    pub version: u64,
}

/// Seconds since the Unix epoch, with fractions.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Job {
    /// A new queued job.
    pub fn new(id: String, kind: JobKind, request: Value, unit: ProgressUnit) -> Job {
        Job {
            id,
            kind,
            status: JobStatus::Queued,
            phase: "queued".into(),
            progress: JobProgress {
                unit,
                done: 0,
                total: 0,
                percent: 0.0,
            },
            request,
            detail: serde_json::Map::new(),
            result: None,
            error: None,
            created_at: now(),
            started_at: None,
            finished_at: None,
            cancel_requested: false,
            owner: String::new(),
            version: 0,
        }
    }
}

/// Where jobs are kept. Implementations must be safe to call from any thread.
pub trait JobStore: Send + Sync {
    /// Adds a new job.
    fn insert(&self, job: Job);
    /// Changes a job (if it exists) and bumps its version; returns the job as changed.
    fn update(&self, id: &str, change: &mut dyn FnMut(&mut Job)) -> Option<Job>;
    fn get(&self, id: &str) -> Option<Job>;
    /// Every job, oldest first.
    fn list(&self) -> Vec<Job>;
    /// Waits until job `id` has a version other than `seen` (or `timeout` passes) and returns
    /// it as it is then.
    fn wait_change(&self, id: &str, seen: u64, timeout: Duration) -> Option<Job>;
}

/// Jobs in memory (lost on restart; finished ones beyond `keep` are forgotten oldest first).
pub struct MemoryJobs {
    jobs: Mutex<BTreeMap<String, Job>>,
    changed: Condvar,
    keep: usize,
}

impl MemoryJobs {
    pub fn new(keep: usize) -> MemoryJobs {
        MemoryJobs {
            jobs: Mutex::new(BTreeMap::new()),
            changed: Condvar::new(),
            keep,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Job>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl JobStore for MemoryJobs {
    fn insert(&self, job: Job) {
        let mut g = self.lock();
        g.insert(job.id.clone(), job);
        let finished: Vec<(f64, String)> = g
            .values()
            .filter(|j| j.status.is_final())
            .map(|j| (j.created_at, j.id.clone()))
            .collect();
        if finished.len() > self.keep {
            let mut finished = finished;
            finished.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (_, id) in &finished[..finished.len() - self.keep] {
                g.remove(id);
            }
        }
    }

    fn update(&self, id: &str, change: &mut dyn FnMut(&mut Job)) -> Option<Job> {
        let mut g = self.lock();
        let j = g.get_mut(id)?;
        change(j);
        j.version += 1;
        let out = j.clone();
        drop(g);
        self.changed.notify_all();
        Some(out)
    }

    fn get(&self, id: &str) -> Option<Job> {
        self.lock().get(id).cloned()
    }

    fn list(&self) -> Vec<Job> {
        let mut v: Vec<Job> = self.lock().values().cloned().collect();
        v.sort_by(|a, b| a.created_at.total_cmp(&b.created_at));
        v
    }

    fn wait_change(&self, id: &str, seen: u64, timeout: Duration) -> Option<Job> {
        let g = self.lock();
        let (g, _) = self
            .changed
            .wait_timeout_while(g, timeout, |m| m.get(id).is_some_and(|j| j.version == seen))
            .unwrap_or_else(|e| e.into_inner());
        g.get(id).cloned()
    }
}
