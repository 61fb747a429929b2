//! A small persistent thread pool: one job at a time, run by every thread (the caller included)
//! with its thread index. Threads spin briefly for the next job, then yield, then sleep: a
//! forward step dispatches a few hundred short jobs and waking a sleeping thread costs more
//! than many of them take, but pure spinning is ruinous when the cores are shared (other
//! processes, tests running in parallel), so every wait gives the core away quickly.
//!
//! On wasm32 (no threads) the pool has one thread and jobs run inline.

#[cfg(not(target_arch = "wasm32"))]
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
#[cfg(not(target_arch = "wasm32"))]
use std::sync::{Condvar, Mutex};

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
    /// Bumped for every job; workers watch it. Publishes `job` (release on bump, acquire
    /// when a worker sees the new value).
    generation: AtomicUsize,
    /// Workers still running the current job.
    pending: AtomicUsize,
    /// The current job: written by `run` only while no worker is running one.
    job: std::cell::UnsafeCell<Option<JobPtr>>,
    /// Workers asleep (or about to sleep) on `wake`: `run` skips the wake-up call, a system
    /// call, when there are none, which is the usual case between the jobs of one step.
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    shutdown: std::sync::atomic::AtomicBool,
    /// Set when a worker's job panicked; the caller re-raises.
    panicked: std::sync::atomic::AtomicBool,
}

// SAFETY: `job` is written only by the thread calling `run` while every worker is idle
// (between jobs) and read by workers only after they observe the generation that follows
// the write; everything else is atomics or locks.
#[cfg(not(target_arch = "wasm32"))]
unsafe impl Sync for Shared {}

/// A fixed set of threads that run one job at a time.
pub struct ThreadPool {
    n_threads: usize,
    /// Bytes of weight matrices the products run on this pool have handed to their kernels
    /// (one relaxed add per tile): instrumentation, so a test can check that a batched step
    /// streams each weight once whatever its number of rows.
    weight_bytes: Arc<AtomicU64>,
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
            ThreadPool {
                n_threads: 1,
                weight_bytes: Arc::default(),
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let shared = Arc::new(Shared {
                generation: AtomicUsize::new(0),
                pending: AtomicUsize::new(0),
                job: std::cell::UnsafeCell::new(None),
                sleepers: AtomicUsize::new(0),
                lock: Mutex::new(()),
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
                weight_bytes: Arc::default(),
                shared,
                handles,
            }
        }
    }

    /// Threads in the pool, the caller included.
    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// Counts `bytes` of weights handed to a kernel (see `weight_bytes`).
    pub fn count_weight_bytes(&self, bytes: usize) {
        self.weight_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// The running count of weight bytes handed to kernels, shared (read it while the pool's
    /// backend is boxed inside an engine).
    pub fn weight_meter(&self) -> Arc<AtomicU64> {
        self.weight_bytes.clone()
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
            // SAFETY: no worker is running a job (the previous `run` waited for all of them),
            // and none reads `job` before it sees the generation bumped below.
            unsafe { *s.job.get() = Some(JobPtr(ptr)) };
            s.pending.store(self.n_threads - 1, Ordering::SeqCst);
            s.generation.fetch_add(1, Ordering::SeqCst);
            // A worker registers as a sleeper under the lock and then re-checks the
            // generation before it waits, so either it sees the bump or we see it here.
            if s.sleepers.load(Ordering::SeqCst) > 0 {
                let _g = s.lock.lock().unwrap();
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
        if !wait_until(|| s.generation.load(Ordering::Acquire) != seen, YIELDS) {
            let mut g = s.lock.lock().unwrap();
            s.sleepers.fetch_add(1, Ordering::SeqCst);
            while s.generation.load(Ordering::SeqCst) == seen && !s.shutdown.load(Ordering::SeqCst)
            {
                g = s.wake.wait(g).unwrap();
            }
            s.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
        if s.shutdown.load(Ordering::SeqCst) {
            return;
        }
        seen = s.generation.load(Ordering::Acquire);
        // SAFETY: written before the generation we just observed, not again until this
        // worker has decremented `pending`.
        let job = unsafe { *s.job.get() };
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
                let _g = self.shared.lock.lock().unwrap();
                self.shared.shutdown.store(true, Ordering::SeqCst);
                self.shared.wake.notify_all();
            }
            for h in self.handles.drain(..) {
                let _ = h.join();
            }
        }
    }
}

/// A barrier inside one pool job: every thread of the pool calls [`PhaseBarrier::wait`] with
/// the same phase numbers 1, 2, … in order, and none passes phase `k` before all have reached
/// it. Writes made before a thread's `wait(k)` are visible to every thread after its own.
pub struct PhaseBarrier {
    arrived: std::sync::atomic::AtomicUsize,
    n: usize,
}

impl PhaseBarrier {
    /// A barrier for `n` threads (the pool's thread count).
    pub fn new(n: usize) -> Self {
        PhaseBarrier {
            arrived: std::sync::atomic::AtomicUsize::new(0),
            n,
        }
    }

    /// Waits until all `n` threads have called `wait(phase)`.
    pub fn wait(&self, phase: usize) {
        use std::sync::atomic::Ordering;
        self.arrived.fetch_add(1, Ordering::AcqRel);
        let target = self.n * phase;
        #[cfg(not(target_arch = "wasm32"))]
        wait_until(
            || self.arrived.load(Ordering::Acquire) >= target,
            usize::MAX,
        );
        #[cfg(target_arch = "wasm32")]
        debug_assert!(self.arrived.load(Ordering::Acquire) >= target);
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
    fn phase_barrier_orders_phases() {
        let pool = ThreadPool::new(3);
        for _ in 0..50 {
            let first = AtomicUsize::new(0);
            let seen = AtomicUsize::new(0);
            let barrier = PhaseBarrier::new(pool.n_threads());
            pool.run(&|_| {
                first.fetch_add(1, Ordering::Relaxed);
                barrier.wait(1);
                // Every thread's phase-1 work is visible after the barrier.
                seen.fetch_add(first.load(Ordering::Relaxed), Ordering::Relaxed);
                barrier.wait(2);
            });
            assert_eq!(seen.load(Ordering::Relaxed), 9);
        }
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
