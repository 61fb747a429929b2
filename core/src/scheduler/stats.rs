//! Counters and latency histograms the scheduler keeps for `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// A cumulative histogram with fixed upper bounds (Prometheus style).
#[derive(Debug)]
pub struct Histogram {
    bounds: Vec<f64>,
    inner: Mutex<HistData>,
}

#[derive(Clone, Debug, Default)]
struct HistData {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    /// A histogram with these (ascending) upper bounds; `+Inf` is implied.
    pub fn new(bounds: &[f64]) -> Self {
        Histogram {
            bounds: bounds.to_vec(),
            inner: Mutex::new(HistData {
                counts: vec![0; bounds.len()],
                ..Default::default()
            }),
        }
    }

    /// Records one observation.
    pub fn observe(&self, v: f64) {
        let mut d = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for (i, b) in self.bounds.iter().enumerate() {
            if v <= *b {
                d.counts[i] += 1;
            }
        }
        d.sum += v;
        d.count += 1;
    }

    /// (upper bound, cumulative count) pairs, then the sum and total count.
    pub fn snapshot(&self) -> (Vec<(f64, u64)>, f64, u64) {
        let d = self.inner.lock().unwrap_or_else(|e| e.into_inner()).clone();
        (
            self.bounds.iter().copied().zip(d.counts).collect(),
            d.sum,
            d.count,
        )
    }
}

const LATENCY_BOUNDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
];

/// Scheduler figures, shared with whoever reports them.
#[derive(Debug)]
pub struct Stats {
    /// Prompt tokens evaluated (cached ones excluded).
    pub prompt_tokens: AtomicU64,
    /// Prompt tokens served from the prefix cache.
    pub cached_prompt_tokens: AtomicU64,
    pub generation_tokens: AtomicU64,
    /// Requests that got a slot.
    pub requests_started: AtomicU64,
    /// Requests that started with at least one cached token.
    pub prefix_cache_hits: AtomicU64,
    /// Of those, requests whose cached start was copied from another sequence's cache.
    pub prefix_copies: AtomicU64,
    pub requests_finished: AtomicU64,
    pub requests_cancelled: AtomicU64,
    pub requests_failed: AtomicU64,
    pub requests_rejected: AtomicU64,
    pub running: AtomicU64,
    pub waiting: AtomicU64,
    /// Positions held across all slots (including idle slots kept for reuse).
    pub kv_used: AtomicU64,
    pub kv_capacity: AtomicU64,
    pub steps: AtomicU64,
    /// Times a running sequence's cache was taken back for lack of blocks (it is fed again
    /// later).
    pub preemptions: AtomicU64,
    /// Time to first token, seconds (from submission).
    pub ttft: Histogram,
    /// Time between consecutive tokens of a stream, seconds.
    pub inter_token: Histogram,
    /// Whole request, seconds.
    pub e2e: Histogram,
}

/// A plain copy of the counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub prompt_tokens: u64,
    pub cached_prompt_tokens: u64,
    pub generation_tokens: u64,
    pub requests_started: u64,
    pub prefix_cache_hits: u64,
    pub prefix_copies: u64,
    pub requests_finished: u64,
    pub requests_cancelled: u64,
    pub requests_failed: u64,
    pub requests_rejected: u64,
    pub running: u64,
    pub waiting: u64,
    pub kv_used: u64,
    pub kv_capacity: u64,
    pub steps: u64,
    pub preemptions: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            prompt_tokens: AtomicU64::new(0),
            cached_prompt_tokens: AtomicU64::new(0),
            generation_tokens: AtomicU64::new(0),
            requests_started: AtomicU64::new(0),
            prefix_cache_hits: AtomicU64::new(0),
            prefix_copies: AtomicU64::new(0),
            requests_finished: AtomicU64::new(0),
            requests_cancelled: AtomicU64::new(0),
            requests_failed: AtomicU64::new(0),
            requests_rejected: AtomicU64::new(0),
            running: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            kv_used: AtomicU64::new(0),
            kv_capacity: AtomicU64::new(0),
            steps: AtomicU64::new(0),
            preemptions: AtomicU64::new(0),
            ttft: Histogram::new(LATENCY_BOUNDS),
            inter_token: Histogram::new(LATENCY_BOUNDS),
            e2e: Histogram::new(LATENCY_BOUNDS),
        }
    }
}

impl Stats {
    /// The counters now.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            prompt_tokens: self.prompt_tokens.load(Relaxed),
            cached_prompt_tokens: self.cached_prompt_tokens.load(Relaxed),
            generation_tokens: self.generation_tokens.load(Relaxed),
            requests_started: self.requests_started.load(Relaxed),
            prefix_cache_hits: self.prefix_cache_hits.load(Relaxed),
            prefix_copies: self.prefix_copies.load(Relaxed),
            requests_finished: self.requests_finished.load(Relaxed),
            requests_cancelled: self.requests_cancelled.load(Relaxed),
            requests_failed: self.requests_failed.load(Relaxed),
            requests_rejected: self.requests_rejected.load(Relaxed),
            running: self.running.load(Relaxed),
            waiting: self.waiting.load(Relaxed),
            kv_used: self.kv_used.load(Relaxed),
            kv_capacity: self.kv_capacity.load(Relaxed),
            steps: self.steps.load(Relaxed),
            preemptions: self.preemptions.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_counts_are_cumulative() {
        let h = Histogram::new(&[0.1, 1.0]);
        h.observe(0.05);
        h.observe(0.5);
        h.observe(3.0);
        let (b, sum, n) = h.snapshot();
        assert_eq!(b, vec![(0.1, 1), (1.0, 2)]);
        assert_eq!(n, 3);
        assert!((sum - 3.55).abs() < 1e-9);
    }
}
