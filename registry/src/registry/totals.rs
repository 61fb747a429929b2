//! Server-wide scheduler figures: each resident model's scheduler counts its own, so the
//! totals are the sum over resident models plus what unloaded models counted before they
//! went (so counters never go backwards when a model is evicted).

use weft_core::scheduler::{Stats, StatsSnapshot};

/// A histogram's cumulative buckets, sum and count.
pub type HistogramData = (Vec<(f64, u64)>, f64, u64);

/// Summed counters and histograms.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    pub counters: StatsSnapshot,
    pub ttft: HistogramData,
    pub inter_token: HistogramData,
    pub e2e: HistogramData,
}

impl Totals {
    /// One scheduler's figures.
    pub fn of(s: &Stats) -> Totals {
        Totals {
            counters: s.snapshot(),
            ttft: s.ttft.snapshot(),
            inter_token: s.inter_token.snapshot(),
            e2e: s.e2e.snapshot(),
        }
    }

    /// Adds one scheduler's figures.
    pub fn add(&mut self, s: &Stats) {
        self.merge(&Totals::of(s));
    }

    /// These totals without the gauges (what an unloaded model leaves behind).
    pub fn retire(&mut self, s: &Stats) {
        let mut one = Totals::of(s);
        let c = &mut one.counters;
        (c.running, c.waiting, c.kv_used, c.kv_capacity) = (0, 0, 0, 0);
        self.merge(&one);
    }

    /// Adds other totals.
    pub fn merge(&mut self, o: &Totals) {
        let t = &mut self.counters;
        let c = &o.counters;
        t.prompt_tokens += c.prompt_tokens;
        t.cached_prompt_tokens += c.cached_prompt_tokens;
        t.generation_tokens += c.generation_tokens;
        t.requests_started += c.requests_started;
        t.prefix_cache_hits += c.prefix_cache_hits;
        t.prefix_copies += c.prefix_copies;
        t.requests_finished += c.requests_finished;
        t.requests_cancelled += c.requests_cancelled;
        t.requests_failed += c.requests_failed;
        t.requests_rejected += c.requests_rejected;
        t.running += c.running;
        t.waiting += c.waiting;
        t.kv_used += c.kv_used;
        t.kv_capacity += c.kv_capacity;
        t.steps += c.steps;
        t.preemptions += c.preemptions;
        add_histogram(&mut self.ttft, o.ttft.clone());
        add_histogram(&mut self.inter_token, o.inter_token.clone());
        add_histogram(&mut self.e2e, o.e2e.clone());
    }
}

fn add_histogram(into: &mut HistogramData, h: HistogramData) {
    if into.0.is_empty() {
        *into = h;
        return;
    }
    for (a, b) in into.0.iter_mut().zip(h.0) {
        a.1 += b.1;
    }
    into.1 += h.1;
    into.2 += h.2;
}
