//! Multimodal rotary positions (Qwen2-VL's M-RoPE) of each sequence.
//!
//! An image of `rows × cols` tokens takes `rows·cols` cache positions, but its rotary
//! positions are a grid: `(t, t + r, t + c)` for the token at row `r`, column `c`, with `t`
//! the rotary position the image starts at. The text after it continues at
//! `t + max(rows, cols)` (llama.cpp's mtmd and transformers agree). So from the end of an
//! image on, a sequence's rotary position is its cache position plus a shift (negative for
//! all but thin images); this keeps those shifts, each from the cache position it starts at.

use std::collections::HashMap;

/// Rotary position shifts per sequence: `(from cache position, shift)`, in order.
#[derive(Debug, Default)]
pub(super) struct RopeShifts {
    by_seq: HashMap<u32, Vec<(usize, i64)>>,
}

impl RopeShifts {
    /// The shift in force at cache position `pos` of `seq`.
    pub fn at(&self, seq: u32, pos: usize) -> i64 {
        self.by_seq
            .get(&seq)
            .and_then(|v| v.iter().rev().find(|&&(from, _)| from <= pos))
            .map_or(0, |&(_, s)| s)
    }

    /// Whether `seq` has any shift (its rotary positions are not its cache positions).
    pub fn has(&self, seq: u32) -> bool {
        self.by_seq.get(&seq).is_some_and(|v| !v.is_empty())
    }

    /// From cache position `from` on, `seq` is shifted by `shift`.
    pub fn push(&mut self, seq: u32, from: usize, shift: i64) {
        let v = self.by_seq.entry(seq).or_default();
        v.retain(|&(f, _)| f < from);
        v.push((from, shift));
    }

    /// `seq` keeps its first `len` positions: shifts starting after them go.
    pub fn truncate(&mut self, seq: u32, len: usize) {
        if let Some(v) = self.by_seq.get_mut(&seq) {
            v.retain(|&(f, _)| f <= len);
        }
    }

    /// `dst` takes the first `n` positions of `src` (and their shifts).
    pub fn copy_prefix(&mut self, src: u32, dst: u32, n: usize) {
        let v: Vec<(usize, i64)> = self
            .by_seq
            .get(&src)
            .map(|v| v.iter().copied().filter(|&(f, _)| f <= n).collect())
            .unwrap_or_default();
        self.by_seq.insert(dst, v);
    }

    /// The rotary positions `[t, h, w, e]` of text rows at these cache positions.
    pub fn text_rows(&self, seqs: &[u32], positions: &[u32]) -> Vec<[u32; 4]> {
        seqs.iter()
            .zip(positions)
            .map(|(&s, &p)| {
                let r = (p as i64 + self.at(s, p as usize)).max(0) as u32;
                [r; 4]
            })
            .collect()
    }
}

/// The rotary positions of an image's `rows × cols` tokens (row by row) starting at rotary
/// position `t`.
pub(super) fn image_rows(t: u32, rows: usize, cols: usize) -> impl Iterator<Item = [u32; 4]> {
    (0..rows * cols).map(move |i| [t, t + (i / cols) as u32, t + (i % cols) as u32, 0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_follow_truncation_and_copies() {
        let mut s = RopeShifts::default();
        assert_eq!(s.at(0, 10), 0);
        // A 3 x 4 image at cache 5..17 (rotary 5..): text after it from rotary 9.
        s.push(0, 17, 9 - 17);
        assert_eq!((s.at(0, 16), s.at(0, 17), s.at(0, 20)), (0, -8, -8));
        assert_eq!(s.text_rows(&[0, 1], &[18, 18]), vec![[10; 4], [18; 4]]);
        s.copy_prefix(0, 1, 17);
        assert_eq!(s.at(1, 30), -8);
        s.copy_prefix(0, 2, 12);
        assert!(!s.has(2));
        s.truncate(0, 12);
        assert_eq!(s.at(0, 20), 0);
        let img: Vec<_> = image_rows(5, 2, 3).collect();
        assert_eq!(img[0], [5, 5, 5, 0]);
        assert_eq!(img[5], [5, 6, 7, 0]);
    }
}
