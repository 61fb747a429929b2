//! Model jobs in the admin storage, so the job list survives a restart and every replica
//! sharing a database lists every replica's jobs.
//!
//! The process that runs a job (its owner) keeps it in memory, as before, for its own progress
//! streams (`wait_change`), and copies it to the database through one writer task: at
//! creation, on every change of status, phase or detail, at the end, and in between at most
//! once a second for progress alone (a download reports every chunk; the database need not
//! see each). Reads of one job prefer this process's memory (fresher), then the database;
//! the list is the database's newest jobs with this process's own laid over them.
//!
//! Cancel reaches a job owned by another replica through the database: the route sets the
//! row's `cancel_requested`, and every owner polls for such rows each second and cancels them
//! itself. Jobs whose owner died are marked failed ("interrupted by a restart"): on SQLite
//! when the next server starts, on Postgres within seconds by any live replica (see
//! `weft_storage`'s jobs module for how a dead owner is told from a live one).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use weft_storage::{JobRow, Storage};

use super::ModelJobs;
use crate::jobs::{Job, JobProgress, JobStatus, JobStore, MemoryJobs};
use crate::server::error::ApiError;

/// Progress alone is written at most this often per job.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// How often an owner looks for cancel requests made on other replicas.
const POLL_EVERY: Duration = Duration::from_secs(1);
/// Every this many polls, a Postgres replica looks for jobs whose owner died.
const ORPHANS_EVERY: u64 = 5;
/// Every this many polls, ended jobs beyond [`KEEP`] are forgotten.
const PRUNE_EVERY: u64 = 600;
/// Jobs the database keeps (ended ones beyond are pruned), and the most a list shows.
const KEEP: i64 = 1000;

const INTERRUPTED: &str =
    "interrupted by a restart: the server running this job stopped before it ended";
const PULL_HINT: &str = "; pull the same model again to resume from its partial download";

enum Write {
    Job(Box<Job>),
    Flush(oneshot::Sender<()>),
}

/// Where a change goes once the storage is attached.
struct Sink {
    tx: mpsc::UnboundedSender<Write>,
}

/// What was last sent of a job, to tell a change worth writing from progress alone.
struct Sent {
    at: Instant,
    status: JobStatus,
    phase: String,
    detail: Value,
}

/// The runner's job store: memory, copied to the admin storage once [`ModelJobs::persist`]
/// attached it (until then, and in tests without a database, memory only).
pub struct PersistedJobs {
    live: MemoryJobs,
    sink: OnceLock<Sink>,
    sent: Mutex<HashMap<String, Sent>>,
}

impl PersistedJobs {
    pub fn new(keep: usize) -> PersistedJobs {
        PersistedJobs {
            live: MemoryJobs::new(keep),
            sink: OnceLock::new(),
            sent: Mutex::new(HashMap::new()),
        }
    }

    fn send(&self, job: &Job) {
        let Some(sink) = self.sink.get() else {
            return;
        };
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        let detail = Value::Object(job.detail.clone());
        let due = match sent.get(&job.id) {
            None => true,
            Some(s) => {
                s.status != job.status
                    || s.phase != job.phase
                    || s.detail != detail
                    || s.at.elapsed() >= PROGRESS_EVERY
            }
        };
        if !due {
            return;
        }
        if job.status.is_final() {
            sent.remove(&job.id);
        } else {
            sent.insert(
                job.id.clone(),
                Sent {
                    at: Instant::now(),
                    status: job.status,
                    phase: job.phase.clone(),
                    detail,
                },
            );
        }
        let _ = sink.tx.send(Write::Job(Box::new(job.clone())));
    }
}

impl JobStore for PersistedJobs {
    fn insert(&self, job: Job) {
        self.send(&job);
        self.live.insert(job);
    }

    fn update(&self, id: &str, change: &mut dyn FnMut(&mut Job)) -> Option<Job> {
        let job = self.live.update(id, change)?;
        self.send(&job);
        Some(job)
    }

    fn get(&self, id: &str) -> Option<Job> {
        self.live.get(id)
    }

    fn list(&self) -> Vec<Job> {
        self.live.list()
    }

    fn wait_change(&self, id: &str, seen: u64, timeout: Duration) -> Option<Job> {
        self.live.wait_change(id, seen, timeout)
    }
}

fn name_of<T: serde::Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn parse<T: serde::de::DeserializeOwned>(s: &str) -> Option<T> {
    serde_json::from_value(Value::String(s.to_string())).ok()
}

fn to_row(j: &Job, owner: &str, owner_lock: i64) -> JobRow {
    JobRow {
        id: j.id.clone(),
        kind: name_of(j.kind),
        status: name_of(j.status),
        phase: j.phase.clone(),
        unit: name_of(j.progress.unit),
        done: j.progress.done.min(i64::MAX as u64) as i64,
        total: j.progress.total.min(i64::MAX as u64) as i64,
        percent: j.progress.percent,
        request: j.request.clone(),
        detail: j.detail.clone(),
        result: j.result.clone(),
        error: j.error.clone(),
        created_at: j.created_at,
        started_at: j.started_at,
        finished_at: j.finished_at,
        owner: owner.to_string(),
        owner_lock,
        cancel_requested: false,
        principal: j.owner.clone(),
    }
}

/// A stored row as the routes show jobs; None for a row of a kind or status this build does
/// not know (written by a newer replica).
fn from_row(r: JobRow) -> Option<Job> {
    Some(Job {
        kind: parse(&r.kind)?,
        status: parse(&r.status)?,
        progress: JobProgress {
            unit: parse(&r.unit)?,
            done: r.done.max(0) as u64,
            total: r.total.max(0) as u64,
            percent: r.percent,
        },
        id: r.id,
        phase: r.phase,
        request: r.request,
        detail: r.detail,
        result: r.result,
        error: r.error,
        created_at: r.created_at,
        started_at: r.started_at,
        finished_at: r.finished_at,
        cancel_requested: r.cancel_requested,
        owner: r.principal,
        version: 0,
    })
}

/// Whose jobs a request reaches: one principal's (the caller's own, or the one an admin
/// named), or, for an admin who asked with `?owner=all`, everyone's.
#[derive(Clone, Debug, PartialEq)]
pub enum Whose {
    Of(String),
    All,
}

impl Whose {
    pub fn sees(&self, j: &Job) -> bool {
        match self {
            Whose::All => true,
            Whose::Of(p) => &j.owner == p,
        }
    }
}

fn storage_error(e: weft_storage::StorageError) -> ApiError {
    ApiError::internal(format!("reading jobs from the database: {e}"))
}

impl ModelJobs {
    /// Attaches the admin storage: marks jobs a dead process left running as failed, then
    /// copies every job of this process to the database and starts polling for cancel
    /// requests (and, on Postgres, for other replicas' orphans).
    pub async fn persist(self: &Arc<Self>, storage: Storage) -> Result<(), String> {
        let owner = storage.job_owner().await.map_err(|e| e.to_string())?;
        let n = storage
            .fail_orphaned_jobs(&owner, true, INTERRUPTED, PULL_HINT)
            .await
            .map_err(|e| e.to_string())?;
        if n > 0 {
            tracing::warn!(
                jobs = n,
                "marked jobs left running by a stopped server as failed"
            );
        }
        if let Err(e) = storage.prune_jobs(KEEP).await {
            tracing::warn!(error = %e, "pruning old jobs");
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (owner_id, lock) = (owner.id.clone(), owner.lock);
        if self.jobs.sink.set(Sink { tx }).is_err() {
            return Err("the jobs are already persisted".into());
        }
        let _ = self.storage.set(storage.clone());
        let st = storage.clone();
        tokio::spawn(async move {
            while let Some(w) = rx.recv().await {
                match w {
                    Write::Job(j) => {
                        if let Err(e) = st.write_job(&to_row(&j, &owner_id, lock)).await {
                            tracing::warn!(job = %j.id, error = %e, "writing a job to the database");
                        }
                    }
                    Write::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        let me = self.clone();
        tokio::spawn(async move {
            // The owner lives as long as this task, which lives as long as the process: on
            // Postgres it holds the lock that tells other replicas this one is alive.
            let owner = owner;
            let mut tick: u64 = 0;
            loop {
                tokio::time::sleep(POLL_EVERY).await;
                tick += 1;
                match storage.jobs_to_cancel(&owner.id).await {
                    Ok(ids) => {
                        for id in ids {
                            if let Some(video) = me.video.get() {
                                video.cancel(&id);
                            }
                            me.runner.cancel(&id);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "polling for job cancel requests"),
                }
                if tick.is_multiple_of(ORPHANS_EVERY) {
                    match storage
                        .fail_orphaned_jobs(&owner, false, INTERRUPTED, PULL_HINT)
                        .await
                    {
                        Ok(0) => {}
                        Ok(n) => {
                            tracing::warn!(jobs = n, "marked jobs of a stopped replica as failed")
                        }
                        Err(e) => tracing::warn!(error = %e, "looking for orphaned jobs"),
                    }
                }
                if tick.is_multiple_of(PRUNE_EVERY) {
                    if let Err(e) = storage.prune_jobs(KEEP).await {
                        tracing::warn!(error = %e, "pruning old jobs");
                    }
                }
            }
        });
        Ok(())
    }

    /// Waits until every change made so far is in the database.
    pub async fn flush(&self) {
        let Some(sink) = self.jobs.sink.get() else {
            return;
        };
        let (tx, rx) = oneshot::channel();
        if sink.tx.send(Write::Flush(tx)).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(5), rx).await;
        }
    }

    /// One job of `whose`: this process's own, else the database's. None also for a job of
    /// another principal (its existence is not told).
    pub async fn job(&self, whose: &Whose, id: &str) -> Result<Option<Job>, ApiError> {
        if let Some(j) = self.runner.get(id) {
            return Ok(Some(j).filter(|j| whose.sees(j)));
        }
        let Some(storage) = self.storage.get() else {
            return Ok(None);
        };
        let row = storage.job(id).await.map_err(storage_error)?;
        Ok(row.and_then(from_row).filter(|j| whose.sees(j)))
    }

    /// The jobs of `whose`, oldest first: the database's newest, with this process's own
    /// (fresher) laid over them.
    pub async fn list(&self, whose: &Whose) -> Result<Vec<Job>, ApiError> {
        let local: Vec<Job> = self
            .runner
            .list()
            .into_iter()
            .filter(|j| whose.sees(j))
            .collect();
        let Some(storage) = self.storage.get() else {
            return Ok(local);
        };
        let rows = match whose {
            Whose::All => storage.jobs(KEEP).await,
            Whose::Of(p) => storage.jobs_of(p, KEEP).await,
        }
        .map_err(storage_error)?;
        let mut all: HashMap<String, Job> = rows
            .into_iter()
            .filter_map(from_row)
            .map(|j| (j.id.clone(), j))
            .collect();
        for j in local {
            all.insert(j.id.clone(), j);
        }
        let mut all: Vec<Job> = all.into_values().collect();
        all.sort_by(|a, b| a.created_at.total_cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(all)
    }

    /// Cancels a job of this process at once (a queued one) or at its next check (a running
    /// one); a job of another replica is asked to stop through the database, and its owner
    /// stops it within about a second. None when `whose` has no such job.
    pub async fn cancel(&self, whose: &Whose, id: &str) -> Result<Option<Job>, ApiError> {
        if self.job(whose, id).await?.is_none() {
            return Ok(None);
        }
        if self.runner.get(id).is_some() {
            // A video generation runs on its own runner (same store): its flag is there.
            if let Some(video) = self.video.get() {
                video.cancel(id);
            }
            return Ok(self.runner.cancel(id));
        }
        let Some(storage) = self.storage.get() else {
            return Ok(None);
        };
        let row = storage
            .request_job_cancel(id)
            .await
            .map_err(|e| ApiError::internal(format!("asking for the job's cancel: {e}")))?;
        Ok(row.and_then(from_row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::{JobKind, ProgressUnit};
    use serde_json::json;

    fn sent(rx: &mut mpsc::UnboundedReceiver<Write>) -> Vec<(JobStatus, String, u64)> {
        let mut out = Vec::new();
        while let Ok(Write::Job(j)) = rx.try_recv() {
            out.push((j.status, j.phase.clone(), j.progress.done));
        }
        out
    }

    #[test]
    fn changes_are_written_and_progress_alone_is_throttled() {
        let jobs = PersistedJobs::new(10);
        let (tx, mut rx) = mpsc::unbounded_channel();
        jobs.insert(Job::new(
            "before".into(),
            JobKind::Pull,
            json!({}),
            ProgressUnit::Bytes,
        ));
        assert!(sent(&mut rx).is_empty(), "nothing is sent before the sink");
        assert!(jobs.sink.set(Sink { tx }).is_ok());
        jobs.insert(Job::new(
            "j".into(),
            JobKind::Pull,
            json!({}),
            ProgressUnit::Bytes,
        ));
        jobs.update("j", &mut |j| {
            j.status = JobStatus::Running;
            j.phase = "downloading".into();
        });
        for n in 1..=50 {
            jobs.update("j", &mut |j| j.progress.done = n);
        }
        jobs.update("j", &mut |j| j.phase = "verifying".into());
        jobs.update("j", &mut |j| {
            j.status = JobStatus::Succeeded;
            j.phase = "done".into();
        });
        let got = sent(&mut rx);
        let phases: Vec<&str> = got.iter().map(|(_, p, _)| p.as_str()).collect();
        assert_eq!(phases, ["queued", "downloading", "verifying", "done"]);
        assert_eq!(got[2].2, 50, "a phase change carries the newest progress");
        assert_eq!(got[3].0, JobStatus::Succeeded);
        assert!(
            jobs.sent.lock().unwrap().is_empty(),
            "ended jobs are forgotten"
        );
    }
}
