//! The job runner: a queue and a fixed number of worker threads.

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::store::{now, Job, JobKind, JobStatus, JobStore, ProgressUnit};

/// A job's work: returns what it made, or why it failed. It should check
/// [`JobContext::cancelled`] often and remove its partial files before returning.
pub type Work = Box<dyn FnOnce(&JobContext) -> Result<Value, String> + Send>;

/// What running work sees of its job.
pub struct JobContext {
    id: String,
    store: Arc<dyn JobStore>,
    cancel: Arc<AtomicBool>,
}

impl JobContext {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether the job was asked to stop.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// Sets what the job is doing now.
    pub fn phase(&self, phase: &str) {
        self.store
            .update(&self.id, &mut |j| j.phase = phase.to_string());
    }

    /// Sets how far it is (`total` 0 while unknown).
    pub fn progress(&self, done: u64, total: u64) {
        self.store.update(&self.id, &mut |j| {
            j.progress.done = done;
            j.progress.total = total;
            j.progress.percent = if total > 0 {
                (done as f64 * 100.0 / total as f64).min(100.0)
            } else {
                0.0
            };
        });
    }

    /// Records a live fact of the work (shown in the job's `detail`).
    pub fn note(&self, key: &str, value: Value) {
        self.store.update(&self.id, &mut |j| {
            if j.detail.get(key) != Some(&value) {
                j.detail.insert(key.to_string(), value.clone());
            }
        });
    }

    /// Changes the progress unit (a job may count bytes, then tensors).
    pub fn unit(&self, unit: ProgressUnit) {
        self.store.update(&self.id, &mut |j| j.progress.unit = unit);
    }
}

struct Shared {
    store: Arc<dyn JobStore>,
    queue: Mutex<VecDeque<(String, Work)>>,
    ready: Condvar,
    cancels: Mutex<HashMap<String, Arc<AtomicBool>>>,
}

/// Runs jobs on `parallel` threads of its own.
pub struct JobRunner {
    shared: Arc<Shared>,
}

impl JobRunner {
    /// Starts the worker threads (they wait for work for as long as the process lives).
    pub fn new(store: Arc<dyn JobStore>, parallel: usize) -> Arc<JobRunner> {
        let shared = Arc::new(Shared {
            store,
            queue: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            cancels: Mutex::new(HashMap::new()),
        });
        for i in 0..parallel.max(1) {
            let s = shared.clone();
            std::thread::Builder::new()
                .name(format!("weft-job-{i}"))
                .spawn(move || worker(s))
                .expect("spawning a job worker thread");
        }
        Arc::new(JobRunner { shared })
    }

    /// The storage the jobs are kept in.
    pub fn store(&self) -> &Arc<dyn JobStore> {
        &self.shared.store
    }

    /// Queues `work` as a new job and returns it (status `queued`).
    pub fn submit(&self, kind: JobKind, request: Value, unit: ProgressUnit, work: Work) -> Job {
        self.submit_as("", kind, request, unit, work)
    }

    /// [`JobRunner::submit`] for `owner` (the principal that asked; recorded on the job). The
    /// id is 128 random bits: one job's id tells nothing of another's.
    pub fn submit_as(
        &self,
        owner: &str,
        kind: JobKind,
        request: Value,
        unit: ProgressUnit,
        work: Work,
    ) -> Job {
        let id = format!("job-{}", random_hex128());
        let mut job = Job::new(id.clone(), kind, request, unit);
        job.owner = owner.to_string();
        self.shared.store.insert(job.clone());
        self.shared
            .cancels
            .lock()
            .unwrap()
            .insert(id.clone(), Arc::new(AtomicBool::new(false)));
        self.shared.queue.lock().unwrap().push_back((id, work));
        self.shared.ready.notify_one();
        job
    }

    /// Asks a job to stop: a queued one is cancelled at once, a running one when its work
    /// next checks. Returns the job, or `None` when there is no such job.
    pub fn cancel(&self, id: &str) -> Option<Job> {
        let job = self.shared.store.get(id)?;
        if job.status.is_final() {
            return Some(job);
        }
        if let Some(flag) = self.shared.cancels.lock().unwrap().get(id) {
            flag.store(true, Ordering::Relaxed);
        }
        let mut q = self.shared.queue.lock().unwrap();
        if let Some(pos) = q.iter().position(|(j, _)| j == id) {
            q.remove(pos);
            drop(q);
            self.shared.cancels.lock().unwrap().remove(id);
            return self.shared.store.update(id, &mut |j| {
                j.status = JobStatus::Cancelled;
                j.phase = "cancelled".into();
                j.error = Some("cancelled".into());
                j.finished_at = Some(now());
            });
        }
        self.shared.store.get(id)
    }

    pub fn get(&self, id: &str) -> Option<Job> {
        self.shared.store.get(id)
    }

    pub fn list(&self) -> Vec<Job> {
        self.shared.store.list()
    }

    /// Waits for job `id` to change from version `seen` (at most `timeout`).
    pub fn wait_change(&self, id: &str, seen: u64, timeout: Duration) -> Option<Job> {
        self.shared.store.wait_change(id, seen, timeout)
    }

    /// Waits until job `id` has ended (at most `timeout`) and returns it.
    pub fn wait(&self, id: &str, timeout: Duration) -> Option<Job> {
        let end = std::time::Instant::now() + timeout;
        let mut job = self.get(id)?;
        while !job.status.is_final() {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            job = self.wait_change(id, job.version, left)?;
        }
        Some(job)
    }
}

fn worker(s: Arc<Shared>) {
    loop {
        let (id, work) = {
            let mut q = s.queue.lock().unwrap();
            loop {
                if let Some(item) = q.pop_front() {
                    break item;
                }
                q = s.ready.wait(q).unwrap();
            }
        };
        let cancel = s
            .cancels
            .lock()
            .unwrap()
            .get(&id)
            .cloned()
            .unwrap_or_default();
        s.store.update(&id, &mut |j| {
            j.status = JobStatus::Running;
            j.phase = "starting".into();
            j.started_at = Some(now());
        });
        let ctx = JobContext {
            id: id.clone(),
            store: s.store.clone(),
            cancel: cancel.clone(),
        };
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| work(&ctx)))
            .unwrap_or_else(|_| Err("internal error: the job panicked".into()));
        let cancelled = cancel.load(Ordering::Relaxed);
        s.store.update(&id, &mut |j| {
            j.finished_at = Some(now());
            match &result {
                Ok(v) => {
                    j.status = JobStatus::Succeeded;
                    j.phase = "done".into();
                    j.result = Some(v.clone());
                    if j.progress.total > 0 {
                        j.progress.done = j.progress.total;
                        j.progress.percent = 100.0;
                    }
                }
                Err(_) if cancelled => {
                    j.status = JobStatus::Cancelled;
                    j.phase = "cancelled".into();
                    j.error = Some("cancelled".into());
                }
                Err(e) => {
                    j.status = JobStatus::Failed;
                    j.phase = "failed".into();
                    j.error = Some(e.clone());
                }
            }
        });
        s.cancels.lock().unwrap().remove(&id);
    }
}

/// 128 bits from the OS random generator as 32 hex digits: a job id nobody can guess or
/// count from another's.
fn random_hex128() -> String {
    let mut b = [0u8; 16];
    // Without the OS generator no id of this server could be made safely: stopping is right.
    getrandom::fill(&mut b).expect("the OS random generator is available");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::super::MemoryJobs;
    use super::*;
    use serde_json::json;

    fn runner(parallel: usize) -> Arc<JobRunner> {
        JobRunner::new(Arc::new(MemoryJobs::new(100)), parallel)
    }

    #[test]
    fn jobs_succeed_fail_and_report_progress() {
        let r = runner(2);
        let ok = r.submit(
            JobKind::Quantize,
            json!({"x": 1}),
            ProgressUnit::Tensors,
            Box::new(|c| {
                c.phase("working");
                c.progress(3, 4);
                Ok(json!({"made": "m"}))
            }),
        );
        let bad = r.submit(
            JobKind::Pull,
            json!({}),
            ProgressUnit::Bytes,
            Box::new(|_| Err("404 not found".into())),
        );
        let ok = r.wait(&ok.id, Duration::from_secs(10)).unwrap();
        assert_eq!(ok.status, JobStatus::Succeeded);
        assert_eq!(ok.progress.done, 4);
        assert_eq!(ok.result.unwrap()["made"], "m");
        assert!(ok.started_at.is_some() && ok.finished_at.is_some());
        let bad = r.wait(&bad.id, Duration::from_secs(10)).unwrap();
        assert_eq!(bad.status, JobStatus::Failed);
        assert_eq!(bad.error.as_deref(), Some("404 not found"));
        assert_eq!(r.list().len(), 2);
    }

    #[test]
    fn cancel_stops_running_and_queued_jobs() {
        let r = runner(1);
        let (tx, rx) = std::sync::mpsc::channel();
        let running = r.submit(
            JobKind::Pull,
            json!({}),
            ProgressUnit::Bytes,
            Box::new(move |c| {
                tx.send(()).unwrap();
                while !c.cancelled() {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err("stopped".into())
            }),
        );
        let queued = r.submit(
            JobKind::Pull,
            json!({}),
            ProgressUnit::Bytes,
            Box::new(|_| Ok(json!(null))),
        );
        rx.recv().unwrap();
        assert_eq!(r.cancel(&queued.id).unwrap().status, JobStatus::Cancelled);
        r.cancel(&running.id);
        let j = r.wait(&running.id, Duration::from_secs(10)).unwrap();
        assert_eq!(j.status, JobStatus::Cancelled);
        assert!(r.cancel("job-none").is_none());
    }
}
