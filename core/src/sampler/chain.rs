//! [`Sampler`]: the chain penalties → logit bias → top-k → top-p → min-p → temperature → draw.

use std::cmp::Ordering;
use std::collections::HashMap;

use super::penalties::{apply_bias, apply_penalties};
use super::rng::{self, Rng};
use super::{SamplerConfig, SamplerError};

/// One token of the final distribution: its (penalised, biased) logit and its probability
/// after every filter and the temperature.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub id: u32,
    pub logit: f32,
    pub p: f32,
}

/// Higher logit first; equal logits by lower id, so every ordering is deterministic. Uses IEEE
/// comparison (-0.0 equals 0.0), as the threshold test in `gather` does; candidates are never
/// NaN.
fn desc(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit
        .partial_cmp(&a.logit)
        .unwrap_or(Ordering::Equal)
        .then(a.id.cmp(&b.id))
}

/// A sampler with its own random state. Not shared between sequences: give each request one.
#[derive(Clone, Debug)]
pub struct Sampler {
    cfg: SamplerConfig,
    seed: u64,
    rng: Rng,
    /// After `sample`: the final candidates and their probabilities.
    cand: Vec<Candidate>,
    /// Whether `cand` is in `desc` order.
    sorted: bool,
    weights: Vec<f64>,
    counts: HashMap<u32, u32>,
}

impl Sampler {
    /// Checks the settings and seeds the generator (`cfg.seed`, or a fresh seed).
    pub fn new(cfg: SamplerConfig) -> Result<Self, SamplerError> {
        cfg.validate()?;
        let seed = cfg.seed.unwrap_or_else(rng::fresh_seed);
        Ok(Sampler {
            cfg,
            seed,
            rng: Rng::new(seed),
            cand: Vec::new(),
            sorted: true,
            weights: Vec::new(),
            counts: HashMap::new(),
        })
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// The seed in use (the drawn one when the config gave none), to report or replay.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Restarts the random stream from a seed.
    pub fn reseed(&mut self, seed: u64) {
        self.seed = seed;
        self.rng = Rng::new(seed);
    }

    /// Picks the next token. `history` is the sequence so far (prompt and generated tokens),
    /// which the penalties look at. `logits` is edited in place (penalties, bias): take raw
    /// log-probabilities for an API response before calling this.
    ///
    /// Panics if `logits` is empty (a caller bug, never a property of user input).
    pub fn sample(&mut self, logits: &mut [f32], history: &[u32]) -> u32 {
        assert!(!logits.is_empty(), "Sampler::sample: empty logits");
        apply_penalties(logits, history, &self.cfg, &mut self.counts);
        apply_bias(logits, &self.cfg);
        self.pick(logits)
    }

    /// Like [`sample`](Self::sample), but only tokens `allow` accepts may be picked
    /// (constrained decoding). Greedy: the most likely allowed token. Sampling: draws until a
    /// draw is allowed, removing refused tokens (a few tries), then falls back to the most
    /// likely allowed token. None when `allow` refuses every token.
    pub fn sample_constrained(
        &mut self,
        logits: &mut [f32],
        history: &[u32],
        allow: &mut dyn FnMut(u32) -> bool,
    ) -> Option<u32> {
        assert!(
            !logits.is_empty(),
            "Sampler::sample_constrained: empty logits"
        );
        apply_penalties(logits, history, &self.cfg, &mut self.counts);
        apply_bias(logits, &self.cfg);
        if self.cfg.temperature > 0.0 {
            for _ in 0..16 {
                let id = self.pick(logits);
                if logits[id as usize] == f32::NEG_INFINITY {
                    break;
                }
                if allow(id) {
                    return Some(id);
                }
                logits[id as usize] = f32::NEG_INFINITY;
            }
        }
        let id = super::constrain::best_allowed(logits, allow)?;
        Some(self.single(logits, id))
    }

    /// The chain after penalties and bias: filters, temperature, draw.
    fn pick(&mut self, logits: &[f32]) -> u32 {
        if self.cfg.temperature <= 0.0 {
            return self.single(logits, argmax(logits));
        }
        self.gather(logits);
        if self.cand.is_empty() {
            // Every logit is -inf or NaN (e.g. all banned): nothing is likelier than anything.
            return self.single(logits, argmax(logits));
        }
        self.truncate();
        self.draw()
    }

    /// The final distribution of the last `sample` call: most likely first when a filter
    /// needed sorting (top-k, top-p), otherwise in id order. A greedy pick is a single
    /// candidate with p = 1.
    pub fn distribution(&self) -> &[Candidate] {
        &self.cand
    }

    /// The `n` most likely tokens of the final distribution of the last `sample` call, as
    /// (id, ln p), most likely first.
    pub fn top_logprobs(&self, n: usize) -> Vec<(u32, f32)> {
        let mut top: Vec<Candidate> = if self.sorted {
            self.cand.iter().take(n).copied().collect()
        } else {
            let mut all = self.cand.clone();
            if n > 0 && all.len() > n {
                all.select_nth_unstable_by(n - 1, |a, b| b.p.total_cmp(&a.p).then(a.id.cmp(&b.id)));
                all.truncate(n);
            }
            all
        };
        top.sort_by(|a, b| b.p.total_cmp(&a.p).then(a.id.cmp(&b.id)));
        top.truncate(n);
        top.into_iter().map(|c| (c.id, c.p.ln())).collect()
    }

    fn single(&mut self, logits: &[f32], id: u32) -> u32 {
        self.cand.clear();
        self.cand.push(Candidate {
            id,
            logit: logits[id as usize],
            p: 1.0,
        });
        self.sorted = true;
        id
    }

    /// Fills `cand` with the top-k tokens (sorted), or every token with a finite logit
    /// (unsorted) when top-k is off.
    fn gather(&mut self, logits: &[f32]) {
        self.cand.clear();
        let n = logits.len();
        let k = self.cfg.top_k.max(self.cfg.min_keep);
        if self.cfg.top_k == 0 || k >= n {
            self.cand
                .extend(logits.iter().enumerate().filter_map(|(i, &l)| {
                    (l > f32::NEG_INFINITY).then_some(Candidate {
                        id: i as u32,
                        logit: l,
                        p: 0.0,
                    })
                }));
            self.sorted = false;
            if self.cfg.top_k > 0 {
                // top-k was asked for, so the result is ordered like any top-k result.
                self.sort();
            }
            return;
        }
        // Partial selection: collect tokens above a running threshold into a buffer and, when
        // it fills, keep its best k and raise the threshold to the k-th best. Scanning in id
        // order, a later token with a logit equal to the threshold loses the id tie-break, so
        // the strict `>` test is exact.
        let cap = (2 * k).max(64);
        let mut threshold = f32::NEG_INFINITY;
        for (i, &l) in logits.iter().enumerate() {
            if l > threshold {
                self.cand.push(Candidate {
                    id: i as u32,
                    logit: l,
                    p: 0.0,
                });
                if self.cand.len() >= cap {
                    self.cand.select_nth_unstable_by(k - 1, desc);
                    self.cand.truncate(k);
                    threshold = self.cand[k - 1].logit;
                }
            }
        }
        if self.cand.len() > k {
            self.cand.select_nth_unstable_by(k - 1, desc);
            self.cand.truncate(k);
        }
        self.cand.sort_unstable_by(desc);
        self.sorted = true;
    }

    /// top-p and min-p. Both keep a most-likely-first prefix of the candidates, so applying
    /// min-p first (a linear filter) gives the same set as llama.cpp's top-p-then-min-p while
    /// sorting only min-p's survivors; top-p's probabilities still use the softmax over all
    /// candidates that top-k left, as in llama.cpp.
    fn truncate(&mut self) {
        let min_keep = self.cfg.min_keep.max(1);
        let max = self.max_logit();
        let use_top_p = self.cfg.top_p < 1.0 && self.cand.len() > min_keep;
        let sum: f64 = if use_top_p {
            self.cand
                .iter()
                .map(|c| rng::exp(c.logit as f64 - max))
                .sum()
        } else {
            0.0
        };

        if self.cfg.min_p > 0.0 && self.cand.len() > min_keep {
            // p / p_max >= min_p  ⇔  logit - max >= ln(min_p)
            let cut = (self.cfg.min_p as f64).ln();
            let before = self.cand.len();
            let kept: Vec<Candidate> = self
                .cand
                .iter()
                .copied()
                .filter(|c| c.logit as f64 - max >= cut)
                .collect();
            if kept.len() >= min_keep {
                self.cand = kept;
            } else {
                self.sort();
                self.cand.truncate(min_keep.min(before));
            }
        }

        if use_top_p && self.cand.len() > min_keep {
            self.top_p_prefix(max, sum, min_keep);
        }
    }

    /// Keeps the shortest most-likely-first prefix whose probability reaches top-p. Sorts only
    /// as much as needed: the best `m` candidates (partial selection), growing `m` until the
    /// prefix is inside it.
    fn top_p_prefix(&mut self, max: f64, sum: f64, min_keep: usize) {
        let target = self.cfg.top_p as f64;
        let n = self.cand.len();
        let mut m = if self.sorted { n } else { 256.min(n) };
        loop {
            if m < n {
                self.cand.select_nth_unstable_by(m - 1, desc);
                self.cand[..m].sort_unstable_by(desc);
            } else {
                self.sort();
            }
            let mut cum = 0.0;
            for (i, c) in self.cand[..m].iter().enumerate() {
                cum += rng::exp(c.logit as f64 - max) / sum;
                if cum >= target && i + 1 >= min_keep {
                    self.cand.truncate(i + 1);
                    self.sorted = true;
                    return;
                }
            }
            if m == n {
                // Rounding kept the sum just under top-p: everything stays.
                return;
            }
            m = (m * 4).min(n);
        }
    }

    /// Temperature, softmax, and one draw from the generator.
    fn draw(&mut self) -> u32 {
        let max = self.max_logit();
        let inv_t = 1.0 / self.cfg.temperature as f64;
        self.weights.clear();
        self.weights.extend(
            self.cand
                .iter()
                .map(|c| rng::exp((c.logit as f64 - max) * inv_t)),
        );
        let total: f64 = self.weights.iter().sum();
        for (c, w) in self.cand.iter_mut().zip(&self.weights) {
            c.p = (w / total) as f32;
        }
        let u = self.rng.next_f64() * total;
        let mut acc = 0.0;
        let mut pick = self.cand[0].id;
        for (c, &w) in self.cand.iter().zip(&self.weights) {
            if w > 0.0 {
                pick = c.id;
                acc += w;
                if u < acc {
                    break;
                }
            }
        }
        pick
    }

    fn max_logit(&self) -> f64 {
        if self.sorted {
            return self.cand[0].logit as f64;
        }
        self.cand
            .iter()
            .map(|c| c.logit)
            .fold(f32::NEG_INFINITY, f32::max) as f64
    }

    fn sort(&mut self) {
        if !self.sorted {
            self.cand.sort_unstable_by(desc);
            self.sorted = true;
        }
    }
}

/// Index of the largest logit (NaN ignored; ties: lowest id; all NaN: 0).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    let mut best_l = f32::NAN;
    for (i, &l) in logits.iter().enumerate() {
        if !l.is_nan() && (best_l.is_nan() || l > best_l) {
            best = i;
            best_l = l;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampler_can_move_between_threads() {
        fn is_send_sync<T: Send + Sync>() {}
        is_send_sync::<Sampler>();
    }

    #[test]
    fn unseeded_samplers_differ() {
        let a = Sampler::new(SamplerConfig::default()).unwrap();
        let b = Sampler::new(SamplerConfig::default()).unwrap();
        assert_ne!(a.seed(), b.seed());
    }
}
