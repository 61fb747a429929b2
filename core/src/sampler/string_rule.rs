//! A constrained JSON string (`pattern`, `format`, `minLength`, `maxLength`): the intersection
//! of their automata plus a length window, and the byte-level matcher the acceptor runs inside
//! the string's quotes.
//!
//! The generated text is JSON, so the matcher decodes it first: a raw UTF-8 sequence or an
//! escape (`\n`, `\u00e9`) is one character to the automaton, and lengths count characters
//! (Unicode scalar values) after unescaping, as JSON Schema does. Characters beyond U+FFFF must
//! come as raw UTF-8: a `\uD8xx` surrogate escape is refused (the model can always write the
//! character itself).
//!
//! No dead ends: for every state, [`StringRule::new`] precomputes which numbers of further
//! characters can lead to acceptance (a bitset per automaton state, capped just above the
//! length window), and a byte is taken only if, after it, some completion still lands inside
//! the window in an accepting state. A byte in the middle of a character is judged by the range
//! of characters it can still become.

use super::automaton::Automaton;

/// Most bits the length table may hold (states × lengths).
const MAX_TABLE_BITS: usize = 64 << 20;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StringRule {
    auto: Automaton,
    min: u32,
    max: Option<u32>,
    /// Lengths at or above `cap` share one bucket.
    cap: u32,
    /// Per state: bit `l` set when `l` more characters (or, for `l == cap`, at least that
    /// many) can reach an accepting state.
    reach: Vec<Vec<u64>>,
}

/// The matcher's state inside one string.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StrMatch {
    /// Live automaton states (sorted).
    states: Vec<u32>,
    /// Characters so far.
    len: u32,
    part: Part,
}

/// A character being read.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Part {
    None,
    Backslash,
    /// `\u` with `left` hex digits to go.
    Hex {
        acc: u32,
        left: u8,
    },
    /// A UTF-8 sequence with `left` continuation bytes to go; the result must lie in `lo..=hi`
    /// (which excludes overlong forms).
    Utf8 {
        acc: u32,
        left: u8,
        lo: u32,
        hi: u32,
    },
}

/// What a byte did.
pub(crate) enum StrByte {
    Bad,
    More,
    /// The closing quote.
    End,
}

fn bit(v: &[u64], l: u32) -> bool {
    v[(l / 64) as usize] >> (l % 64) & 1 == 1
}

/// Whether some bit in `from..=to` is set, a word at a time (the window can be thousands of
/// lengths wide).
fn any_bit(v: &[u64], from: u32, to: u32) -> bool {
    if from > to {
        return false;
    }
    let (fw, tw) = ((from / 64) as usize, (to / 64) as usize);
    (fw..=tw).any(|w| {
        let lo = if w == fw { from % 64 } else { 0 };
        let hi = if w == tw { to % 64 } else { 63 };
        let mask = (u64::MAX >> (63 - hi)) & (u64::MAX << lo);
        v[w] & mask != 0
    })
}

impl StringRule {
    /// The strings all of `autos` accept with `min..=max` characters. The error says why no
    /// string qualifies (or that the bounds make the table too large).
    pub(crate) fn new(
        autos: Vec<Automaton>,
        min: u32,
        max: Option<u32>,
    ) -> Result<StringRule, String> {
        if max.is_some_and(|m| m < min) {
            return Err("maxLength is below minLength".into());
        }
        let mut auto = Automaton::any();
        for a in autos {
            auto = auto
                .intersect(&a)
                .ok_or("pattern and format together are too large to enforce")?;
        }
        let auto = auto
            .trim()
            .ok_or("pattern and format together match no string")?;
        let cap = min.max(max.map_or(0, |m| m + 1)).max(1);
        let words = cap as usize / 64 + 1;
        if auto.len().saturating_mul(words * 64) > MAX_TABLE_BITS {
            return Err(format!(
                "maxLength / minLength {cap} with this pattern is too large to enforce"
            ));
        }
        let reach = lengths(&auto, cap, words);
        let rule = StringRule {
            auto,
            min,
            max,
            cap,
            reach,
        };
        if !rule.feasible(0, 0) {
            return Err(format!(
                "no string of the pattern / format has between {min} and {} characters",
                max.map_or("any number of".to_string(), |m| m.to_string())
            ));
        }
        Ok(rule)
    }

    /// Whether from automaton state `q`, after `n` characters, some completion is accepted.
    fn feasible(&self, q: u32, n: u32) -> bool {
        let r = &self.reach[q as usize];
        if self.max.is_none() && bit(r, self.cap) {
            return true;
        }
        let from = self.min.saturating_sub(n);
        let to = match self.max {
            Some(m) if m < n => return false,
            Some(m) => (m - n).min(self.cap - 1),
            None => self.cap - 1,
        };
        any_bit(r, from, to)
    }

    /// The state just after the opening quote.
    pub(crate) fn start(&self) -> StrMatch {
        StrMatch {
            states: vec![0],
            len: 0,
            part: Part::None,
        }
    }

    /// Whether the string may close now.
    fn can_close(&self, m: &StrMatch) -> bool {
        m.len >= self.min
            && self.max.is_none_or(|x| m.len <= x)
            && m.states.iter().any(|&q| self.auto.accept[q as usize])
    }

    /// Whether some character in `lo..=hi` can come next.
    fn any_in(&self, m: &StrMatch, lo: u32, hi: u32) -> bool {
        lo <= hi
            && m.states.iter().any(|&q| {
                self.auto.trans[q as usize]
                    .iter()
                    .any(|(set, to)| set.meets(lo, hi) && self.feasible(*to, m.len + 1))
            })
    }

    /// Takes character `c`; false when no live path goes on with it.
    fn char(&self, m: &mut StrMatch, c: u32) -> bool {
        let mut next: Vec<u32> = m
            .states
            .iter()
            .flat_map(|&q| self.auto.trans[q as usize].iter())
            .filter(|(set, to)| set.contains(c) && self.feasible(*to, m.len + 1))
            .map(|(_, to)| *to)
            .collect();
        if next.is_empty() {
            return false;
        }
        next.sort_unstable();
        next.dedup();
        m.states = next;
        m.len += 1;
        m.part = Part::None;
        true
    }

    /// One byte of the string's JSON text (after the opening quote).
    pub(crate) fn byte(&self, m: &mut StrMatch, b: u8) -> StrByte {
        let ok = |t: bool| if t { StrByte::More } else { StrByte::Bad };
        match m.part {
            Part::None => match b {
                b'"' => {
                    if self.can_close(m) {
                        StrByte::End
                    } else {
                        StrByte::Bad
                    }
                }
                b'\\' => {
                    // An escape yields a character up to U+FFFF.
                    m.part = Part::Backslash;
                    ok(self.any_in(m, 0, 0xFFFF))
                }
                0x00..=0x1F | 0x7F => StrByte::Bad,
                0x20..=0x7E => ok(self.char(m, b as u32)),
                _ => {
                    let (acc, left, lo, hi) = match b {
                        0xC2..=0xDF => (b as u32 & 0x1F, 1, 0x80, 0x7FF),
                        0xE0..=0xEF => (b as u32 & 0x0F, 2, 0x800, 0xFFFF),
                        0xF0..=0xF4 => (b as u32 & 0x07, 3, 0x10000, 0x10FFFF),
                        _ => return StrByte::Bad,
                    };
                    m.part = Part::Utf8 { acc, left, lo, hi };
                    ok(self.utf8_possible(m, acc, left, lo, hi))
                }
            },
            Part::Backslash => {
                let c = match b {
                    b'"' | b'\\' | b'/' => b as u32,
                    b'b' => 0x08,
                    b'f' => 0x0C,
                    b'n' => 0x0A,
                    b'r' => 0x0D,
                    b't' => 0x09,
                    b'u' => {
                        m.part = Part::Hex { acc: 0, left: 4 };
                        return ok(self.any_in(m, 0, 0xFFFF));
                    }
                    _ => return StrByte::Bad,
                };
                ok(self.char(m, c))
            }
            Part::Hex { acc, left } => {
                let Some(d) = (b as char).to_digit(16) else {
                    return StrByte::Bad;
                };
                let acc = acc * 16 + d;
                let left = left - 1;
                if left == 0 {
                    return ok(self.char(m, acc));
                }
                m.part = Part::Hex { acc, left };
                let span = 4 * left as u32;
                ok(self.any_in(m, acc << span, (acc << span) | ((1 << span) - 1)))
            }
            Part::Utf8 { acc, left, lo, hi } => {
                if b & 0xC0 != 0x80 {
                    return StrByte::Bad;
                }
                let acc = (acc << 6) | (b as u32 & 0x3F);
                let left = left - 1;
                if left == 0 {
                    return ok((lo..=hi).contains(&acc) && self.char(m, acc));
                }
                m.part = Part::Utf8 { acc, left, lo, hi };
                ok(self.utf8_possible(m, acc, left, lo, hi))
            }
        }
    }

    fn utf8_possible(&self, m: &StrMatch, acc: u32, left: u8, lo: u32, hi: u32) -> bool {
        let span = 6 * left as u32;
        let from = (acc << span).max(lo);
        let to = ((acc << span) | ((1 << span) - 1)).min(hi);
        self.any_in(m, from, to)
    }
}

/// The length table: a fixed point of "accepting → 0; a transition to a state that can finish
/// in `l` → `l + 1` (saturating at `cap`)", by a worklist over reverse edges.
fn lengths(auto: &Automaton, cap: u32, words: usize) -> Vec<Vec<u64>> {
    let n = auto.len();
    let mut reach = vec![vec![0u64; words]; n];
    let mut back: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (q, t) in auto.trans.iter().enumerate() {
        for (_, to) in t {
            back[*to as usize].push(q as u32);
        }
    }
    let mut todo = Vec::new();
    for (q, r) in reach.iter_mut().enumerate() {
        if auto.accept[q] {
            r[0] |= 1;
            todo.push(q as u32);
        }
    }
    let mut queued = vec![false; n];
    while let Some(t) = todo.pop() {
        queued[t as usize] = false;
        // The lengths from a predecessor via `t`: t's shifted by one, saturating.
        let mut shifted = vec![0u64; words];
        let src = &reach[t as usize];
        for w in 0..words {
            shifted[w] = src[w] << 1 | if w > 0 { src[w - 1] >> 63 } else { 0 };
        }
        if bit(src, cap) || bit(src, cap - 1) {
            shifted[(cap / 64) as usize] |= 1 << (cap % 64);
        }
        // Nothing above the cap bit (the cap's word is the last).
        let last = (cap / 64) as usize;
        let keep = if cap % 64 == 63 {
            u64::MAX
        } else {
            (1u64 << (cap % 64 + 1)) - 1
        };
        shifted[last] &= keep;
        for &p in &back[t as usize] {
            let r = &mut reach[p as usize];
            let mut changed = false;
            for w in 0..words {
                let v = r[w] | shifted[w];
                if v != r[w] {
                    r[w] = v;
                    changed = true;
                }
            }
            if changed && !queued[p as usize] {
                queued[p as usize] = true;
                todo.push(p);
            }
        }
    }
    reach
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::regex;

    fn rule(p: &str, min: u32, max: Option<u32>) -> StringRule {
        StringRule::new(vec![regex::compile(p).unwrap()], min, max).unwrap()
    }

    /// Feeds the JSON text of a string's body (no opening quote); how many bytes were taken and
    /// whether the last one closed it.
    fn run(r: &StringRule, text: &str) -> (usize, bool) {
        let mut m = r.start();
        for (i, b) in text.bytes().enumerate() {
            match r.byte(&mut m, b) {
                StrByte::Bad => return (i, false),
                StrByte::More => {}
                StrByte::End => return (i + 1, true),
            }
        }
        (text.len(), false)
    }

    #[test]
    fn bit_windows() {
        let v = [1u64 << 63, 1 << 2];
        assert!(any_bit(&v, 0, 63) && any_bit(&v, 63, 63) && any_bit(&v, 60, 70));
        assert!(!any_bit(&v, 0, 62) && !any_bit(&v, 64, 65) && any_bit(&v, 66, 66));
        assert!(!any_bit(&v, 67, 127) && !any_bit(&v, 5, 4));
        // A wide window with nothing ruled out stays cheap and right.
        let r = rule("", 0, Some(5000));
        assert_eq!(run(&r, "abc\""), (4, true));
    }

    #[test]
    fn escapes_are_one_character_to_the_pattern_and_the_length() {
        let r = rule(r"^a\nb$", 0, None);
        assert_eq!(run(&r, r#"a\nb""#), (5, true));
        assert_eq!(run(&r, r#"a\u000ab""#), (9, true));
        assert_eq!(
            run(&r, r#"a\u000b"#),
            (6, false),
            "\\u000b is not a newline"
        );
        let r = rule(r"^é{2}$", 0, None);
        assert_eq!(run(&r, "\u{e9}\\u00e9\""), (9, true));
        assert_eq!(
            run(&r, "\u{e8}"),
            (1, false),
            "the second UTF-8 byte picks the character"
        );
        // Lengths are in characters.
        let r = rule("", 2, Some(3));
        assert_eq!(run(&r, "\u{1F600}\\\"\""), (7, true));
        assert_eq!(run(&r, "a\""), (1, false));
        assert_eq!(run(&r, "abc\""), (4, true));
        assert_eq!(run(&r, "abcd"), (3, false));
        // Surrogate escapes are refused: astral characters come as UTF-8.
        assert_eq!(run(&r, r"\uD83D"), (3, false));
    }

    #[test]
    fn lengths_and_patterns_intersect_without_dead_ends() {
        // [a-c]+ with minLength 3: the quote waits for the third character.
        let r = rule("^[a-c]+$", 3, Some(4));
        assert_eq!(run(&r, "ab\""), (2, false));
        assert_eq!(run(&r, "abcab"), (4, false));
        assert_eq!(run(&r, "abca\""), (5, true));
        // Fixed-length alternatives: only those that fit the window survive.
        let r = rule("^(?:ab|abcdef)$", 3, None);
        assert_eq!(run(&r, "abcdef\""), (7, true));
        assert_eq!(run(&r, "ab\""), (2, false));
        assert!(StringRule::new(vec![regex::compile("^a{3}$").unwrap()], 4, None).is_err());
        assert!(StringRule::new(
            vec![
                regex::compile("^[a-z]+$").unwrap(),
                regex::compile("^[0-9]+$").unwrap()
            ],
            0,
            None
        )
        .is_err());
        assert!(StringRule::new(vec![], 5, Some(4)).is_err());
        // Unanchored: anything around the match, within maxLength.
        let r = rule("ab", 0, Some(4));
        assert_eq!(run(&r, "xxab\""), (5, true));
        assert_eq!(run(&r, "xxx"), (2, false), "no room left for ab");
    }
}
