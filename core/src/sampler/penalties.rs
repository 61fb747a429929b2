//! Repetition, presence and frequency penalties, and logit bias: edits of the raw logits.

use std::collections::HashMap;

use super::SamplerConfig;

/// Applies the penalties to the tokens seen in the last `penalty_last_n` entries of `history`
/// (llama.cpp's rule for the repetition penalty, OpenAI's for presence and frequency):
/// `l = l > 0 ? l / repeat : l * repeat; l -= count * frequency + presence`.
/// Ids outside the vocabulary are ignored. Only the logits of seen tokens change.
pub fn apply_penalties(
    logits: &mut [f32],
    history: &[u32],
    cfg: &SamplerConfig,
    counts: &mut HashMap<u32, u32>,
) {
    let neutral =
        cfg.repeat_penalty == 1.0 && cfg.presence_penalty == 0.0 && cfg.frequency_penalty == 0.0;
    if neutral || cfg.penalty_last_n == 0 || history.is_empty() {
        return;
    }
    let window = match usize::try_from(cfg.penalty_last_n) {
        Ok(n) => &history[history.len().saturating_sub(n)..],
        Err(_) => history, // -1: the whole history
    };
    counts.clear();
    for &t in window {
        *counts.entry(t).or_insert(0) += 1;
    }
    for (&id, &count) in counts.iter() {
        let Some(l) = logits.get_mut(id as usize) else {
            continue;
        };
        if cfg.repeat_penalty != 1.0 {
            *l = if *l <= 0.0 {
                *l * cfg.repeat_penalty
            } else {
                *l / cfg.repeat_penalty
            };
        }
        *l -= count as f32 * cfg.frequency_penalty + cfg.presence_penalty;
    }
}

/// Adds each configured bias to its token's logit (ids outside the vocabulary are ignored).
pub fn apply_bias(logits: &mut [f32], cfg: &SamplerConfig) {
    for (&id, &bias) in &cfg.logit_bias {
        if let Some(l) = logits.get_mut(id as usize) {
            *l += bias;
        }
    }
}
