//! Sequences into steps: each step holds whole sequences, back to back (packed) or each
//! padded to the step's longest (padded), within a row budget.

use crate::backend::{SeqSpan, StepBatch};

/// How a step lays out its sequences.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Layout {
    /// Back to back: no padding rows (attention and pooling stay within each span).
    #[default]
    Packed,
    /// Each sequence padded to the step's longest with the pad token (masked out).
    Padded,
}

/// One step: its rows and, per sequence, the input it embeds.
pub struct Step {
    pub tokens: Vec<u32>,
    pub positions: Vec<u32>,
    pub seqs: Vec<u32>,
    pub spans: Vec<SeqSpan>,
    /// Input index of each span.
    pub inputs: Vec<usize>,
}

impl Step {
    pub fn batch(&self) -> StepBatch<'_> {
        StepBatch {
            tokens: &self.tokens,
            positions: &self.positions,
            seqs: &self.seqs,
        }
    }
}

/// Splits `seqs` (input index, ids) into steps of at most `max_rows` rows (a longer sequence
/// gets a step of its own) and `max_seqs` sequences, shortest first so a padded step wastes
/// little.
pub fn steps(
    seqs: &[(usize, Vec<u32>)],
    max_rows: usize,
    max_seqs: usize,
    layout: Layout,
    pad: u32,
) -> Vec<Step> {
    let mut order: Vec<usize> = (0..seqs.len()).collect();
    order.sort_by_key(|&i| seqs[i].1.len());
    let mut out = Vec::new();
    let mut group: Vec<usize> = Vec::new();
    let rows_of = |group: &[usize], extra: usize| -> usize {
        let lens = group.iter().map(|&i| seqs[i].1.len()).chain([extra]);
        match layout {
            Layout::Packed => lens.sum(),
            // Shortest first: the newest is the longest.
            Layout::Padded => extra * (group.len() + 1),
        }
    };
    for i in order {
        let len = seqs[i].1.len();
        if !group.is_empty() && (rows_of(&group, len) > max_rows || group.len() >= max_seqs) {
            out.push(make(seqs, &group, layout, pad));
            group.clear();
        }
        group.push(i);
    }
    if !group.is_empty() {
        out.push(make(seqs, &group, layout, pad));
    }
    out
}

fn make(seqs: &[(usize, Vec<u32>)], group: &[usize], layout: Layout, pad: u32) -> Step {
    let width = group.iter().map(|&i| seqs[i].1.len()).max().unwrap_or(0);
    let mut s = Step {
        tokens: Vec::new(),
        positions: Vec::new(),
        seqs: Vec::new(),
        spans: Vec::new(),
        inputs: Vec::new(),
    };
    for (slot, &i) in group.iter().enumerate() {
        let ids = &seqs[i].1;
        let len = match layout {
            Layout::Packed => ids.len(),
            Layout::Padded => width,
        };
        s.spans.push(SeqSpan {
            start: s.tokens.len() as u32,
            len: len as u32,
            valid: ids.len() as u32,
        });
        s.inputs.push(seqs[i].0);
        s.tokens.extend_from_slice(ids);
        s.tokens.resize(s.tokens.len() + len - ids.len(), pad);
        s.positions.extend(0..len as u32);
        s.seqs.extend(std::iter::repeat_n(slot as u32, len));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_within_the_budget_and_pads_when_asked() {
        let seqs: Vec<(usize, Vec<u32>)> = vec![
            (0, vec![1; 5]),
            (1, vec![2; 2]),
            (2, vec![3; 3]),
            (3, vec![4; 9]),
        ];
        let st = steps(&seqs, 6, 8, Layout::Packed, 0);
        // Shortest first: [2, 3] (5 rows), [5] (5), [9] (alone, over budget).
        let lens: Vec<Vec<usize>> = st.iter().map(|s| s.inputs.clone()).collect();
        assert_eq!(lens, vec![vec![1, 2], vec![0], vec![3]]);
        assert_eq!(st[0].positions, vec![0, 1, 0, 1, 2]);
        assert_eq!(st[0].seqs, vec![0, 0, 1, 1, 1]);
        let padded = steps(&seqs, 6, 8, Layout::Padded, 7);
        assert_eq!(padded[0].tokens, vec![2, 2, 7, 3, 3, 3]);
        assert_eq!(
            padded[0].spans[0],
            SeqSpan {
                start: 0,
                len: 3,
                valid: 2
            }
        );
        assert_eq!(steps(&seqs, 100, 2, Layout::Packed, 0).len(), 2);
    }
}
