//! Log-probabilities of raw logits, for the APIs' `logprobs` fields.

use std::cmp::Ordering;

/// ln Σ exp(l) over the finite logits (f64 accumulation).
fn log_sum_exp(logits: &[f32]) -> f64 {
    let max = logits
        .iter()
        .copied()
        .filter(|l| !l.is_nan())
        .fold(f32::NEG_INFINITY, f32::max) as f64;
    if max == f64::NEG_INFINITY {
        return max;
    }
    let sum: f64 = logits
        .iter()
        .filter(|l| !l.is_nan())
        .map(|&l| (l as f64 - max).exp())
        .sum();
    max + sum.ln()
}

/// The log-softmax of one token's logit.
pub fn logprob(logits: &[f32], id: u32) -> f32 {
    match logits.get(id as usize) {
        Some(&l) => (l as f64 - log_sum_exp(logits)) as f32,
        None => f32::NEG_INFINITY,
    }
}

/// The `n` most likely tokens under softmax(logits), most likely first (ties: lower id first),
/// as (id, log-probability). Partial selection: no sort of the whole vocabulary.
pub fn top_logprobs(logits: &[f32], n: usize) -> Vec<(u32, f32)> {
    if n == 0 || logits.is_empty() {
        return Vec::new();
    }
    let lse = log_sum_exp(logits);
    let by_logit_desc = |a: &(u32, f32), b: &(u32, f32)| -> Ordering {
        b.1.partial_cmp(&a.1)
            .unwrap_or(Ordering::Equal)
            .then(a.0.cmp(&b.0))
    };
    let mut all: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.is_nan())
        .map(|(i, &l)| (i as u32, l))
        .collect();
    if all.len() > n {
        all.select_nth_unstable_by(n - 1, by_logit_desc);
        all.truncate(n);
    }
    all.sort_by(by_logit_desc);
    all.into_iter()
        .map(|(id, l)| (id, (l as f64 - lse) as f32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_values() {
        let logits = [0.0f32, (2.0f32).ln(), f32::NEG_INFINITY, 0.0];
        // probabilities 1/4, 2/4, 0, 1/4
        let top = top_logprobs(&logits, 3);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 0, 3]);
        assert!((top[0].1 - 0.5f32.ln()).abs() < 1e-6);
        assert!((top[1].1 - 0.25f32.ln()).abs() < 1e-6);
        assert!((logprob(&logits, 3) - 0.25f32.ln()).abs() < 1e-6);
        assert_eq!(logprob(&logits, 2), f32::NEG_INFINITY);
        assert_eq!(logprob(&logits, 9), f32::NEG_INFINITY);
        assert_eq!(top_logprobs(&logits, 10).len(), 4);
    }
}
