//! A nondeterministic finite automaton over characters without ε-moves: what a `pattern` or a
//! `format` compiles to (see [`regex`](super::regex)), intersected when a string has both.
//!
//! The acceptor runs it on a set of current states (no determinization: the sets stay small
//! for the patterns schemas use, and a DFA of a pattern like `[a-z]{0,61}` intersected with a
//! format could blow up). State 0 is the start.

use super::charset::CharSet;

/// Most states an automaton may have (after products and counted repetition).
pub(crate) const MAX_STATES: usize = 20_000;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Automaton {
    /// Per state: (characters, next state).
    pub(crate) trans: Vec<Vec<(CharSet, u32)>>,
    pub(crate) accept: Vec<bool>,
}

impl Automaton {
    /// Matches any string.
    pub(crate) fn any() -> Automaton {
        Automaton {
            trans: vec![vec![(CharSet::all(), 0)]],
            accept: vec![true],
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.accept.len()
    }

    /// Strings both accept: the reachable part of the product automaton. None when it would
    /// pass [`MAX_STATES`].
    pub(crate) fn intersect(&self, other: &Automaton) -> Option<Automaton> {
        let mut index = std::collections::HashMap::new();
        let mut pairs = vec![(0u32, 0u32)];
        index.insert((0u32, 0u32), 0u32);
        let mut out = Automaton {
            trans: Vec::new(),
            accept: Vec::new(),
        };
        let mut i = 0;
        while i < pairs.len() {
            let (a, b) = pairs[i];
            let mut t = Vec::new();
            for (sa, ta) in &self.trans[a as usize] {
                for (sb, tb) in &other.trans[b as usize] {
                    let s = sa.intersect(sb);
                    if s.is_empty() {
                        continue;
                    }
                    let next = *index.entry((*ta, *tb)).or_insert_with(|| {
                        pairs.push((*ta, *tb));
                        (pairs.len() - 1) as u32
                    });
                    t.push((s, next));
                }
            }
            if pairs.len() > MAX_STATES {
                return None;
            }
            out.trans.push(t);
            out.accept
                .push(self.accept[a as usize] && other.accept[b as usize]);
            i += 1;
        }
        Some(out)
    }

    /// Drops the states from which no accepting state can be reached (and those the start
    /// cannot reach), so every state left has a way to finish. None when the start itself
    /// cannot finish: the automaton matches nothing.
    pub(crate) fn trim(&self) -> Option<Automaton> {
        let n = self.len();
        let mut back: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (q, t) in self.trans.iter().enumerate() {
            for (_, to) in t {
                back[*to as usize].push(q as u32);
            }
        }
        let mut live = self.accept.clone();
        let mut todo: Vec<u32> = (0..n as u32).filter(|&q| live[q as usize]).collect();
        while let Some(q) = todo.pop() {
            for &p in &back[q as usize] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    todo.push(p);
                }
            }
        }
        if !live[0] {
            return None;
        }
        // Renumber the live states the start reaches, start first.
        let mut new_id = vec![u32::MAX; n];
        let mut order = vec![0u32];
        new_id[0] = 0;
        let mut i = 0;
        while i < order.len() {
            let q = order[i] as usize;
            for (_, to) in &self.trans[q] {
                let to = *to as usize;
                if live[to] && new_id[to] == u32::MAX {
                    new_id[to] = order.len() as u32;
                    order.push(to as u32);
                }
            }
            i += 1;
        }
        let trans = order
            .iter()
            .map(|&q| {
                self.trans[q as usize]
                    .iter()
                    .filter(|(_, to)| live[*to as usize])
                    .map(|(s, to)| (s.clone(), new_id[*to as usize]))
                    .collect()
            })
            .collect();
        let accept = order.iter().map(|&q| self.accept[q as usize]).collect();
        Some(Automaton { trans, accept })
    }

    /// Whether it accepts `s` (tests and the format self-checks).
    #[cfg(test)]
    pub(crate) fn matches(&self, s: &str) -> bool {
        let mut cur = vec![0u32];
        for c in s.chars() {
            let mut next: Vec<u32> = cur
                .iter()
                .flat_map(|&q| self.trans[q as usize].iter())
                .filter(|(set, _)| set.contains(c as u32))
                .map(|(_, to)| *to)
                .collect();
            next.sort_unstable();
            next.dedup();
            if next.is_empty() {
                return false;
            }
            cur = next;
        }
        cur.iter().any(|&q| self.accept[q as usize])
    }
}
