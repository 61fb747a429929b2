//! Sets of Unicode scalar values as sorted, disjoint, non-adjacent inclusive ranges: the labels
//! on the transitions of the string automata ([`Automaton`](super::automaton::Automaton)).
//!
//! Surrogate code points (U+D800..U+DFFF) are never members: they are not characters, and a
//! JSON string cannot carry one on its own, so a set that contained them would promise a
//! character the decoder can never produce.

/// The largest code point.
pub(crate) const MAX_CHAR: u32 = 0x10FFFF;
const SURROGATES: (u32, u32) = (0xD800, 0xDFFF);

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct CharSet {
    ranges: Vec<(u32, u32)>,
}

impl CharSet {
    /// The set of the given inclusive ranges (any order, overlaps allowed).
    pub(crate) fn from_ranges(mut r: Vec<(u32, u32)>) -> CharSet {
        r.retain(|(a, b)| a <= b);
        r.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(r.len());
        for (a, b) in r {
            let b = b.min(MAX_CHAR);
            if a > b {
                continue;
            }
            match out.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        // Cut the surrogates out.
        let mut ranges = Vec::with_capacity(out.len() + 1);
        for (a, b) in out {
            if b < SURROGATES.0 || a > SURROGATES.1 {
                ranges.push((a, b));
                continue;
            }
            if a < SURROGATES.0 {
                ranges.push((a, SURROGATES.0 - 1));
            }
            if b > SURROGATES.1 {
                ranges.push((SURROGATES.1 + 1, b));
            }
        }
        CharSet { ranges }
    }

    pub(crate) fn char(c: char) -> CharSet {
        CharSet::from_ranges(vec![(c as u32, c as u32)])
    }

    /// Every character.
    pub(crate) fn all() -> CharSet {
        CharSet::from_ranges(vec![(0, MAX_CHAR)])
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub(crate) fn contains(&self, c: u32) -> bool {
        // Few ranges per set: a binary search on the range ends.
        let i = self.ranges.partition_point(|&(_, b)| b < c);
        self.ranges.get(i).is_some_and(|&(a, _)| a <= c)
    }

    /// Whether some member lies in `lo..=hi`.
    pub(crate) fn meets(&self, lo: u32, hi: u32) -> bool {
        let i = self.ranges.partition_point(|&(_, b)| b < lo);
        self.ranges.get(i).is_some_and(|&(a, _)| a <= hi)
    }

    pub(crate) fn union(&self, other: &CharSet) -> CharSet {
        let mut r = self.ranges.clone();
        r.extend_from_slice(&other.ranges);
        CharSet::from_ranges(r)
    }

    pub(crate) fn complement(&self) -> CharSet {
        let mut r = Vec::with_capacity(self.ranges.len() + 1);
        let mut next = 0u32;
        for &(a, b) in &self.ranges {
            if a > next {
                r.push((next, a - 1));
            }
            next = b + 1;
        }
        if next <= MAX_CHAR {
            r.push((next, MAX_CHAR));
        }
        CharSet::from_ranges(r)
    }

    pub(crate) fn intersect(&self, other: &CharSet) -> CharSet {
        let (mut i, mut j) = (0, 0);
        let mut r = Vec::new();
        while i < self.ranges.len() && j < other.ranges.len() {
            let (a1, b1) = self.ranges[i];
            let (a2, b2) = other.ranges[j];
            let (a, b) = (a1.max(a2), b1.min(b2));
            if a <= b {
                r.push((a, b));
            }
            if b1 < b2 {
                i += 1;
            } else {
                j += 1;
            }
        }
        CharSet { ranges: r }
    }

    /// The ranges, for tests that build strings out of a set.
    #[cfg(test)]
    pub(crate) fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_skip_surrogates() {
        let s = CharSet::from_ranges(vec![(b'a' as u32, b'c' as u32), (b'd' as u32, b'f' as u32)]);
        assert_eq!(s.ranges(), &[(97, 102)]);
        let all = CharSet::all();
        assert!(!all.contains(0xD800) && all.contains(0xD7FF) && all.contains(0xE000));
        assert!(!all.meets(0xD800, 0xDFFF));
        assert!(all.complement().is_empty());
        let digits = CharSet::from_ranges(vec![(48, 57)]);
        let not = digits.complement();
        assert!(!not.contains(53) && not.contains(47) && not.contains(58));
        assert_eq!(not.intersect(&digits), CharSet::default());
        assert_eq!(digits.union(&not), all);
        assert!(digits.meets(0, 48) && !digits.meets(58, 1000));
    }
}
