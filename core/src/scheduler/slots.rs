//! Sequence slots and what their caches hold, for prefix reuse.

/// One engine sequence slot.
#[derive(Clone, Debug, Default)]
pub(crate) struct Slot {
    /// Token ids whose keys/values the cache holds, in position order.
    pub cached: Vec<u32>,
    /// Whether a request is using the slot.
    pub busy: bool,
    /// When the slot was last released (a step counter), to pick the least recently used.
    pub last_used: u64,
}

/// Length of the common prefix of two id lists.
pub(crate) fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// How many cached tokens a prompt can keep in a slot: the common prefix, less one so at least
/// one prompt token is evaluated (its logits start generation), and zero when going back that
/// far would need positions a sliding-window ring buffer has already overwritten.
pub(crate) fn reusable(cached: &[u32], prompt: &[u32], rewind_limit: usize) -> usize {
    let common = common_prefix(cached, prompt).min(prompt.len().saturating_sub(1));
    if cached.len() - common > rewind_limit {
        0
    } else {
        common
    }
}

/// Picks the free slot for `prompt`: the longest reusable prefix, then the least recently
/// used (so idle caches with useful prefixes survive longest). Returns (slot, reused tokens).
pub(crate) fn choose(
    slots: &[Slot],
    prompt: &[u32],
    rewind_limit: usize,
) -> Option<(usize, usize)> {
    slots
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.busy)
        .map(|(i, s)| (i, reusable(&s.cached, prompt, rewind_limit), s.last_used))
        .max_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)))
        .map(|(i, r, _)| (i, r))
}

/// The slot other than `slot` (running or idle) whose cache shares the longest reusable start
/// with `tokens`: (that slot, positions to copy). None when no cache shares any.
pub(crate) fn donor(
    slots: &[Slot],
    slot: usize,
    tokens: &[u32],
    rewind_limit: usize,
) -> Option<(usize, usize)> {
    slots
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != slot)
        .map(|(i, s)| (i, reusable(&s.cached, tokens, rewind_limit)))
        .filter(|&(_, n)| n > 0)
        .max_by_key(|&(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(cached: &[u32], busy: bool, last_used: u64) -> Slot {
        Slot {
            cached: cached.to_vec(),
            busy,
            last_used,
        }
    }

    #[test]
    fn longest_prefix_wins_and_one_token_is_always_evaluated() {
        let slots = vec![
            slot(&[1, 2, 3], false, 5),
            slot(&[1, 2, 3, 4, 5], false, 1),
            slot(&[1, 2, 3, 4, 5, 6], true, 0),
        ];
        assert_eq!(
            choose(&slots, &[1, 2, 3, 4, 5, 6, 7], usize::MAX),
            Some((1, 5))
        );
        // The whole prompt cached: the last token is evaluated again.
        assert_eq!(choose(&slots, &[1, 2, 3], usize::MAX), Some((1, 2)));
        // Nothing shared: the least recently used slot.
        assert_eq!(choose(&slots, &[9], usize::MAX), Some((1, 0)));
    }

    #[test]
    fn rewinding_past_the_ring_buffer_gives_no_reuse() {
        assert_eq!(reusable(&[1, 2, 3, 4, 5, 6], &[1, 2, 9], 2), 0);
        assert_eq!(reusable(&[1, 2, 3, 4], &[1, 2, 9], 2), 2);
    }

    #[test]
    fn a_donor_is_the_longest_shared_start_in_any_other_slot() {
        let slots = vec![
            slot(&[1, 2], false, 0),
            slot(&[1, 2, 3, 4], true, 0),
            slot(&[9, 9], false, 0),
        ];
        assert_eq!(donor(&slots, 0, &[1, 2, 3, 4, 5], usize::MAX), Some((1, 4)));
        // Never the slot itself.
        assert_eq!(donor(&slots, 1, &[1, 2, 3, 4, 5], usize::MAX), Some((0, 2)));
        assert_eq!(donor(&slots, 0, &[7], usize::MAX), None);
    }

    #[test]
    fn no_free_slot() {
        assert_eq!(choose(&[slot(&[], true, 0)], &[1], 0), None);
    }
}
