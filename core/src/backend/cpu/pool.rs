//! A small persistent thread pool: one job at a time, run by every thread (the caller included)
//! with its thread index. Threads spin briefly for the next job, then yield, then sleep: a
//! forward step dispatches a few hundred short jobs and waking a sleeping thread costs more
//! than many of them take, but pure spinning is ruinous when the cores are shared (other
//! processes, tests running in parallel), so every wait gives the core away quickly.
//!
//! On wasm32 (no threads) the pool has one thread and jobs run inline.

#[cfg(not(target_arch = "wasm32"))]
use std::sync::atomic::{AtomicUsize, Ordering};
#[cfg(not(target_arch = "wasm32"))]
use std::sync::{Arc, Condvar, Mutex};

/// Number of physical cores (hyper-threads of one core counted once), or the logical count when
/// that cannot be told.
pub fn physical_cores() -> usize {
    #[cfg(target_os = "linux")]
    if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
        let mut cores = std::collections::HashSet::new();
        let mut phys = "";
        for line in info.lines() {
            let mut kv = line.splitn(2, ':').map(str::trim);
            match (kv.next(), kv.next()) {
                (Some("physical id"), Some(v)) => phys = v,
                (Some("core id"), Some(v)) => {
                    cores.insert((phys.to_string(), v.to_string()));
                }
                _ => {}
            }
        }
        if !cores.is_empty() {
            return cores.len();
        }
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A job as the workers see it: a borrowed closure with its lifetime erased. Sound because
/// [`ThreadPool::run`] does not return before every worker has finished with it.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Clone, Copy)]
struct JobPtr(*const (dyn Fn(usize) + Sync));
#[cfg(not(target_arch = "wasm32"))]
unsafe impl Send for JobPtr {}

#[cfg(not(target_arch = "wasm32"))]
struct Shared {
    /// Bumped for every job; workers watch it.
    generation: AtomicUsize,
    /// Workers still running the current job.
    pending: AtomicUsize,
    job: Mutex<Option<JobPtr>>,
    wake: Condvar,
    shutdown: std::sync::atomic::AtomicBool,
    /// Set when a worker's job panicked; the caller re-raises.
    panicked: std::sync::atomic::AtomicBool,
}

/// A fixed set of threads that run one job at a time.
pub struct ThreadPool {
    n_threads: usize,
    #[cfg(not(target_arch = "wasm32"))]
    shared: Arc<Shared>,
    #[cfg(not(target_arch = "wasm32"))]
    handles: Vec<std::thread::JoinHandle<()>>,
}

/// Busy-wait iterations before a waiting thread starts yielding its core.
#[cfg(not(target_arch = "wasm32"))]
const SPIN: usize = 2_000;
/// `yield_now` rounds before a worker goes to sleep on the condition variable.
#[cfg(not(target_arch = "wasm32"))]
const YIELDS: usize = 200;

/// Waits until `done()` holds: spin, then yield the core between checks.
#[cfg(not(target_arch = "wasm32"))]
fn wait_until(done: impl Fn() -> bool, max_yields: usize) -> bool {
    for _ in 0..SPIN {
        if done() {
            return true;
        }
        std::hint::spin_loop();
    }
    for _ in 0..max_yields {
        if done() {
            return true;
        }
        std::thread::yield_now();
    }
    done()
}

impl ThreadPool {
    /// A pool of `n_threads` (at least 1; the calling thread is one of them).
    pub fn new(n_threads: usize) -> Self {
        let n_threads = n_threads.max(1);
        #[cfg(target_arch = "wasm32")]
        {
            let _ = n_threads;
            ThreadPool { n_threads: 1 }
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let shared = Arc::new(Shared {
                generation: AtomicUsize::new(0),
                pending: AtomicUsize::new(0),
                job: Mutex::new(None),
                wake: Condvar::new(),
                shutdown: std::sync::atomic::AtomicBool::new(false),
                panicked: std::sync::atomic::AtomicBool::new(false),
            });
            let handles = (1..n_threads)
                .map(|tid| {
                    let s = shared.clone();
                    std::thread::Builder::new()
                        .name(format!("weft-cpu-{tid}"))
                        .spawn(move || worker(s, tid))
                        .expect("cannot spawn a CPU worker thread")
                })
                .collect();
            ThreadPool {
                n_threads,
                shared,
                handles,
            }
        }
    }

    /// Threads in the pool, the caller included.
    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// Runs `f(thread_index)` on every thread and returns when all are done.
    pub fn run(&self, f: &(dyn Fn(usize) + Sync)) {
        #[cfg(target_arch = "wasm32")]
        f(0);
        #[cfg(not(target_arch = "wasm32"))]
        {
            if self.n_threads == 1 {
                f(0);
                return;
            }
            let s = &self.shared;
            // SAFETY: only the lifetime is erased; we wait below until no worker uses it.
            let ptr: *const (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(f) };
            *s.job.lock().unwrap() = Some(JobPtr(ptr));
            s.pending.store(self.n_threads - 1, Ordering::SeqCst);
            {
                let _g = s.job.lock().unwrap();
                s.generation.fetch_add(1, Ordering::SeqCst);
                s.wake.notify_all();
            }
            let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(0)));
            wait_until(|| s.pending.load(Ordering::Acquire) == 0, usize::MAX);
            if let Err(p) = mine {
                std::panic::resume_unwind(p);
            }
            if s.panicked.swap(false, Ordering::SeqCst) {
                panic!("a CPU worker thread panicked");
            }
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn worker(s: Arc<Shared>, tid: usize) {
    let mut seen = 0usize;
    loop {
        // Wait for a new generation: spin, yield, then sleep.
        wait_until(|| s.generation.load(Ordering::Acquire) != seen, YIELDS);
        let job = {
            let mut g = s.job.lock().unwrap();
            while s.generation.load(Ordering::Acquire) == seen && !s.shutdown.load(Ordering::SeqCst)
            {
                g = s.wake.wait(g).unwrap();
            }
            if s.shutdown.load(Ordering::SeqCst) {
                return;
            }
            seen = s.generation.load(Ordering::Acquire);
            *g
        };
        if let Some(JobPtr(f)) = job {
            // SAFETY: the caller of `run` keeps the closure alive until `pending` reaches 0.
            let f = unsafe { &*f };
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(tid))).is_err() {
                s.panicked.store(true, Ordering::SeqCst);
            }
        }
        s.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        #[cfg(not(target_arch = "wasm32"))]
        {
            {
                let _g = self.shared.job.lock().unwrap();
                self.shared.shutdown.store(true, Ordering::SeqCst);
                self.shared.wake.notify_all();
            }
            for h in self.handles.drain(..) {
                let _ = h.join();
            }
        }
    }
}

/// Splits `0..n` into `parts` near-equal ranges and returns the `i`-th.
pub fn split_range(n: usize, parts: usize, i: usize) -> std::ops::Range<usize> {
    let base = n / parts;
    let rem = n % parts;
    let start = i * base + i.min(rem);
    start..start + base + usize::from(i < rem)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_thread_runs_each_job() {
        let pool = ThreadPool::new(3);
        let total = AtomicUsize::new(0);
        for _ in 0..100 {
            pool.run(&|tid| {
                total.fetch_add(tid + 1, Ordering::Relaxed);
            });
        }
        assert_eq!(total.load(Ordering::Relaxed), 100 * (1 + 2 + 3));
    }

    #[test]
    fn ranges_cover_everything_once() {
        for n in [0, 1, 7, 64, 1000] {
            for parts in 1..5 {
                let mut next = 0;
                for i in 0..parts {
                    let r = split_range(n, parts, i);
                    assert_eq!(r.start, next);
                    next = r.end;
                }
                assert_eq!(next, n);
            }
        }
    }
}
