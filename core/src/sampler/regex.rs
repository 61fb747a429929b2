//! The regular-expression subset of JSON Schema `pattern` (ECMA-262 syntax) that constrained
//! decoding enforces, compiled to an [`Automaton`] over characters.
//!
//! Supported: literals and escapes (`\d \D \w \W \s \S`, `\n \r \t \f \v \0`, `\xHH`,
//! `\uHHHH`, `\u{H..}`, `\cX`, any escaped punctuation), classes `[a-z0-9_]` and negated
//! classes, `.` (anything but a line terminator, as in ECMA), groups `( )`, `(?: )` and
//! `(?<name> )`, alternation, the quantifiers `* + ? {n} {n,} {n,m}` (lazy forms match the same
//! strings), and the anchors `^` / `$` at the start / end of a top-level alternative. JSON
//! Schema patterns are unanchored: a side without an anchor may have anything around it.
//! Everything else (backreferences, lookaround, word boundaries, Unicode property escapes,
//! anchors inside groups) is an error naming the construct: it cannot be expressed by a finite
//! automaton, or we chose not to.
//!
//! Compilation is Thompson's construction followed by ε-removal: one automaton state per
//! character-consuming NFA state, plus the start.

use super::automaton::{Automaton, MAX_STATES};
use super::charset::CharSet;

/// Largest count in `{n,m}`.
const MAX_COUNT: u32 = 1000;

#[derive(Clone, Debug)]
enum Ast {
    Set(CharSet),
    Concat(Vec<Ast>),
    Alt(Vec<Ast>),
    Repeat(Box<Ast>, u32, Option<u32>),
}

/// Compiles `pattern`; the error names the unsupported construct (or the syntax error).
pub(crate) fn compile(pattern: &str) -> Result<Automaton, String> {
    let mut p = Parser {
        s: pattern.chars().collect(),
        i: 0,
    };
    let ast = p.top()?;
    Thompson::build(&ast)
}

struct Parser {
    s: Vec<char>,
    i: usize,
}

fn digits() -> CharSet {
    CharSet::from_ranges(vec![('0' as u32, '9' as u32)])
}

fn word() -> CharSet {
    CharSet::from_ranges(vec![
        ('0' as u32, '9' as u32),
        ('A' as u32, 'Z' as u32),
        ('a' as u32, 'z' as u32),
        ('_' as u32, '_' as u32),
    ])
}

/// ECMA `\s`: white space and line terminators.
fn space() -> CharSet {
    CharSet::from_ranges(vec![
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ])
}

/// What `.` matches: anything but a line terminator.
fn dot() -> CharSet {
    CharSet::from_ranges(vec![(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]).complement()
}

fn anything_star() -> Ast {
    Ast::Repeat(Box::new(Ast::Set(CharSet::all())), 0, None)
}

/// One escape's meaning: a set (`\d`) or a single character.
enum Escaped {
    Set(CharSet),
    Char(u32),
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn peek_at(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// The whole pattern: top-level alternatives, each anchored or not at either end.
    fn top(&mut self) -> Result<Ast, String> {
        let mut branches = Vec::new();
        loop {
            let start = self.eat('^');
            let mut seq = self.sequence(true)?;
            let end = self.eat('$');
            if !start {
                seq.insert(0, anything_star());
            }
            if !end {
                seq.push(anything_star());
            }
            branches.push(Ast::Concat(seq));
            match self.peek() {
                None => break,
                Some('|') => self.i += 1,
                Some(')') => return Err("unbalanced `)`".into()),
                Some(c) => return Err(format!("anchor `{c}` inside the pattern is not supported")),
            }
        }
        Ok(Ast::Alt(branches))
    }

    fn alternation(&mut self) -> Result<Ast, String> {
        let mut branches = vec![Ast::Concat(self.sequence(false)?)];
        while self.eat('|') {
            branches.push(Ast::Concat(self.sequence(false)?));
        }
        Ok(Ast::Alt(branches))
    }

    /// Atoms with quantifiers up to `|`, `)` or the end; at the top level also up to a `$`
    /// that ends the alternative.
    fn sequence(&mut self, top: bool) -> Result<Vec<Ast>, String> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            match c {
                '|' | ')' => break,
                '$' if top && matches!(self.peek_at(1), None | Some('|')) => break,
                '^' | '$' => {
                    return Err(format!(
                        "anchor `{c}` inside the pattern is not supported (only at the start / end)"
                    ))
                }
                _ => {}
            }
            let atom = self.atom()?;
            items.push(self.quantified(atom)?);
        }
        Ok(items)
    }

    fn quantified(&mut self, atom: Ast) -> Result<Ast, String> {
        let (min, max) = match self.peek() {
            Some(c @ ('*' | '+' | '?')) => {
                self.i += 1;
                match c {
                    '*' => (0, None),
                    '+' => (1, None),
                    _ => (0, Some(1)),
                }
            }
            Some('{') => match self.braces() {
                Some(q) => q,
                None => return Ok(atom),
            },
            _ => return Ok(atom),
        };
        if max.is_some_and(|m| m < min) {
            return Err(format!(
                "quantifier {{{min},{}}} is out of order",
                max.unwrap()
            ));
        }
        if min > MAX_COUNT || max.is_some_and(|m| m > MAX_COUNT) {
            return Err(format!(
                "counts above {MAX_COUNT} in a quantifier are not supported"
            ));
        }
        // A lazy quantifier matches the same strings.
        self.eat('?');
        if matches!(self.peek(), Some('*' | '+' | '?')) {
            return Err("a quantifier follows a quantifier (nothing to repeat)".into());
        }
        Ok(Ast::Repeat(Box::new(atom), min, max))
    }

    /// `{n}`, `{n,}`, `{n,m}` at the cursor (consumed), or None (then `{` is a literal).
    fn braces(&mut self) -> Option<(u32, Option<u32>)> {
        let mut j = self.i + 1;
        let num = |j: &mut usize, s: &[char]| -> Option<u32> {
            let from = *j;
            while s.get(*j).is_some_and(|c| c.is_ascii_digit()) {
                *j += 1;
            }
            if *j == from {
                return None;
            }
            let text: String = s[from..*j].iter().collect();
            Some(text.parse().unwrap_or(u32::MAX))
        };
        let min = num(&mut j, &self.s)?;
        let max = if self.s.get(j) == Some(&',') {
            j += 1;
            if self.s.get(j) == Some(&'}') {
                None
            } else {
                Some(num(&mut j, &self.s)?)
            }
        } else {
            Some(min)
        };
        if self.s.get(j) != Some(&'}') {
            return None;
        }
        self.i = j + 1;
        Some((min, max))
    }

    fn atom(&mut self) -> Result<Ast, String> {
        let c = self.peek().ok_or("unexpected end")?;
        self.i += 1;
        Ok(match c {
            '(' => {
                if self.eat('?') {
                    match (self.peek(), self.peek_at(1)) {
                        (Some(':'), _) => self.i += 1,
                        (Some('=' | '!'), _) => return Err("lookahead is not supported".into()),
                        (Some('<'), Some('=' | '!')) => {
                            return Err("lookbehind is not supported".into())
                        }
                        (Some('<'), _) => {
                            // A named group: the name does not change what matches.
                            while let Some(c) = self.peek() {
                                self.i += 1;
                                if c == '>' {
                                    break;
                                }
                            }
                        }
                        _ => return Err("group modifiers `(?...)` are not supported".into()),
                    }
                }
                let inner = self.alternation()?;
                if !self.eat(')') {
                    return Err("unbalanced `(`".into());
                }
                inner
            }
            '[' => Ast::Set(self.class()?),
            '.' => Ast::Set(dot()),
            '\\' => match self.escape(false)? {
                Escaped::Set(s) => Ast::Set(s),
                Escaped::Char(c) => Ast::Set(CharSet::from_ranges(vec![(c, c)])),
            },
            '*' | '+' | '?' => return Err(format!("`{c}` has nothing to repeat")),
            ')' => return Err("unbalanced `)`".into()),
            c => Ast::Set(CharSet::char(c)),
        })
    }

    /// After `\`.
    fn escape(&mut self, in_class: bool) -> Result<Escaped, String> {
        let c = self.peek().ok_or("pattern ends with `\\`")?;
        self.i += 1;
        let set = |s: CharSet| Ok(Escaped::Set(s));
        let ch = |c: u32| Ok(Escaped::Char(c));
        match c {
            'd' => set(digits()),
            'D' => set(digits().complement()),
            'w' => set(word()),
            'W' => set(word().complement()),
            's' => set(space()),
            'S' => set(space().complement()),
            'b' if in_class => ch(0x08),
            'b' | 'B' => Err(format!("word boundary `\\{c}` is not supported")),
            '1'..='9' => Err(format!("backreference `\\{c}` is not supported")),
            '0' if self.peek().is_some_and(|d| d.is_ascii_digit()) => {
                Err("octal escapes are not supported".into())
            }
            '0' => ch(0),
            'k' => Err("named backreference `\\k` is not supported".into()),
            'p' | 'P' => Err(format!("Unicode property escape `\\{c}` is not supported")),
            'n' => ch(0x0A),
            'r' => ch(0x0D),
            't' => ch(0x09),
            'f' => ch(0x0C),
            'v' => ch(0x0B),
            'c' => match self.peek() {
                Some(l) if l.is_ascii_alphabetic() => {
                    self.i += 1;
                    ch(l as u32 % 32)
                }
                _ => Err("`\\c` must be followed by a letter".into()),
            },
            'x' => ch(self.hex(2)?),
            'u' if self.eat('{') => {
                let mut v = 0u32;
                let mut n = 0;
                while let Some(d) = self.peek().and_then(|d| d.to_digit(16)) {
                    self.i += 1;
                    v = v.saturating_mul(16).saturating_add(d);
                    n += 1;
                }
                if n == 0 || !self.eat('}') || char::from_u32(v).is_none() {
                    return Err("bad `\\u{...}` escape".into());
                }
                ch(v)
            }
            'u' => {
                let v = self.hex(4)?;
                if (0xD800..=0xDFFF).contains(&v) {
                    return Err("surrogate escapes `\\uD800`..`\\uDFFF` are not supported".into());
                }
                ch(v)
            }
            c if c.is_ascii_alphanumeric() => Err(format!("unknown escape `\\{c}`")),
            c => ch(c as u32),
        }
    }

    fn hex(&mut self, n: usize) -> Result<u32, String> {
        let mut v = 0;
        for _ in 0..n {
            let d = self
                .peek()
                .and_then(|d| d.to_digit(16))
                .ok_or("bad hex escape")?;
            self.i += 1;
            v = v * 16 + d;
        }
        Ok(v)
    }

    /// After `[`: a class up to its `]`.
    fn class(&mut self) -> Result<CharSet, String> {
        let negate = self.eat('^');
        let mut set = CharSet::default();
        loop {
            let c = self.peek().ok_or("unbalanced `[`")?;
            if c == ']' {
                self.i += 1;
                break;
            }
            let lo = self.class_atom()?;
            let is_range = self.peek() == Some('-') && !matches!(self.peek_at(1), Some(']') | None);
            if !is_range {
                set = set.union(&match lo {
                    Escaped::Set(s) => s,
                    Escaped::Char(c) => CharSet::from_ranges(vec![(c, c)]),
                });
                continue;
            }
            self.i += 1;
            let hi = self.class_atom()?;
            match (lo, hi) {
                (Escaped::Char(a), Escaped::Char(b)) if a <= b => {
                    set = set.union(&CharSet::from_ranges(vec![(a, b)]));
                }
                (Escaped::Char(_), Escaped::Char(_)) => {
                    return Err("class range out of order".into())
                }
                _ => return Err("a class range cannot end at `\\d`, `\\w` or `\\s`".into()),
            }
        }
        Ok(if negate { set.complement() } else { set })
    }

    fn class_atom(&mut self) -> Result<Escaped, String> {
        let c = self.peek().ok_or("unbalanced `[`")?;
        self.i += 1;
        if c == '\\' {
            self.escape(true)
        } else {
            Ok(Escaped::Char(c as u32))
        }
    }
}

/// Thompson NFA states; built back to front, so each state knows its successor.
enum T {
    Set(CharSet, u32),
    Split(Vec<u32>),
    Match,
}

struct Thompson {
    states: Vec<T>,
    sets: usize,
}

impl Thompson {
    fn build(ast: &Ast) -> Result<Automaton, String> {
        let mut t = Thompson {
            states: vec![T::Match],
            sets: 0,
        };
        let start = t.node(ast, 0)?;
        Ok(t.eliminate_epsilon(start))
    }

    fn push(&mut self, s: T) -> Result<u32, String> {
        if matches!(s, T::Set(..)) {
            self.sets += 1;
        }
        if self.states.len() > 4 * MAX_STATES || self.sets > MAX_STATES {
            return Err("the pattern is too large (counted repetition)".into());
        }
        self.states.push(s);
        Ok((self.states.len() - 1) as u32)
    }

    /// States matching `ast` then continuing at `next`; returns the entry.
    fn node(&mut self, ast: &Ast, next: u32) -> Result<u32, String> {
        match ast {
            Ast::Set(s) => self.push(T::Set(s.clone(), next)),
            Ast::Concat(items) => {
                let mut n = next;
                for a in items.iter().rev() {
                    n = self.node(a, n)?;
                }
                Ok(n)
            }
            Ast::Alt(bs) => {
                let mut ids = Vec::with_capacity(bs.len());
                for b in bs {
                    ids.push(self.node(b, next)?);
                }
                self.push(T::Split(ids))
            }
            Ast::Repeat(a, min, max) => {
                let mut n = match max {
                    None => {
                        // a*: a loop state that either enters `a` (which comes back) or leaves.
                        let lp = self.push(T::Split(Vec::new()))?;
                        let body = self.node(a, lp)?;
                        self.states[lp as usize] = T::Split(vec![body, next]);
                        lp
                    }
                    Some(m) => {
                        // (a(a(a)?)?)?: each optional copy may stop early.
                        let mut cur = next;
                        for _ in *min..*m {
                            let body = self.node(a, cur)?;
                            cur = self.push(T::Split(vec![body, next]))?;
                        }
                        cur
                    }
                };
                for _ in 0..*min {
                    n = self.node(a, n)?;
                }
                Ok(n)
            }
        }
    }

    /// The character states and whether Match are ε-reachable from `from`.
    fn closure(&self, from: u32, seen: &mut [u32], mark: u32) -> (Vec<u32>, bool) {
        let mut sets = Vec::new();
        let mut matched = false;
        let mut todo = vec![from];
        while let Some(q) = todo.pop() {
            if seen[q as usize] == mark {
                continue;
            }
            seen[q as usize] = mark;
            match &self.states[q as usize] {
                T::Set(..) => sets.push(q),
                T::Split(next) => todo.extend(next.iter().rev()),
                T::Match => matched = true,
            }
        }
        (sets, matched)
    }

    /// One automaton state for the start and one per character state ("just after it").
    fn eliminate_epsilon(&self, start: u32) -> Automaton {
        let mut id = vec![u32::MAX; self.states.len()];
        let mut order: Vec<Option<u32>> = vec![None];
        let mut seen = vec![0u32; self.states.len()];
        let mut out = Automaton {
            trans: Vec::new(),
            accept: Vec::new(),
        };
        let mut i = 0;
        while i < order.len() {
            let from = match order[i] {
                None => start,
                Some(q) => match &self.states[q as usize] {
                    T::Set(_, next) => *next,
                    _ => unreachable!("only character states are queued"),
                },
            };
            let (sets, matched) = self.closure(from, &mut seen, i as u32 + 1);
            let mut t = Vec::with_capacity(sets.len());
            for q in sets {
                if id[q as usize] == u32::MAX {
                    id[q as usize] = order.len() as u32;
                    order.push(Some(q));
                }
                if let T::Set(s, _) = &self.states[q as usize] {
                    t.push((s.clone(), id[q as usize]));
                }
            }
            out.trans.push(t);
            out.accept.push(matched);
            i += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        compile(p).unwrap().matches(s)
    }

    #[test]
    fn anchors_literals_classes_and_quantifiers() {
        let p = r"^[A-Z]{3}-\d{4}$";
        assert!(m(p, "ABC-1234"));
        for s in ["ABC-123", "abc-1234", "ABC-12345", "xABC-1234", "ABCD-1234"] {
            assert!(!m(p, s), "{s}");
        }
        assert!(m(r"^a(?:b|cd)*e?$", "abcdbb"));
        assert!(m(r"^a(?:b|cd)*e?$", "ae"));
        assert!(!m(r"^a(?:b|cd)*e?$", "ac"));
        assert!(m(r"^x{2,}$", "xxxx") && !m(r"^x{2,}$", "x"));
        assert!(m(r"^x{1,3}$", "xxx") && !m(r"^x{1,3}$", "xxxx"));
        assert!(m(r"^[^0-9\s]+$", "ab_é") && !m(r"^[^0-9\s]+$", "a b"));
        assert!(m(r"^\.\\\w$", r".\_"));
        assert!(m(r"^.$", "é") && !m(r"^.$", "\n"));
        assert!(m(r"^\u00e9\x41\n$", "éA\n"));
        assert!(
            m(r"^a{,2}$", "a{,2}"),
            "a brace that is no quantifier is a literal"
        );
        assert!(m(r"^[a-]$", "-") && m(r"^(?<year>\d\d)$", "12"));
        assert!(m(r"^$", "") && !m(r"^$", "a"));
    }

    #[test]
    fn unanchored_sides_allow_anything_around() {
        assert!(m("ab", "xxabyy"));
        assert!(m("^ab", "abyy") && !m("^ab", "xab"));
        assert!(m("ab$", "xab") && !m("ab$", "abx"));
        // Anchors bind per top-level alternative.
        assert!(m("^a|b$", "ax") && m("^a|b$", "xb") && !m("^a|b$", "xa"));
        assert!(m("", "anything"));
    }

    #[test]
    fn constructs_outside_the_subset_are_named() {
        for (p, word) in [
            (r"(a)\1", "backreference"),
            (r"a(?=b)", "lookahead"),
            (r"(?<!a)b", "lookbehind"),
            (r"\bword", "word boundary"),
            (r"\p{L}", "Unicode property"),
            (r"a^b", "anchor"),
            (r"(^a)", "anchor"),
            (r"(a", "unbalanced"),
            (r"a)", "unbalanced"),
            (r"*a", "nothing to repeat"),
            (r"[z-a]", "out of order"),
            (r"\q", "unknown escape"),
            (r"a{2000}", "1000"),
        ] {
            let e = compile(p).unwrap_err();
            assert!(e.contains(word), "{p}: {e}");
        }
    }
}
