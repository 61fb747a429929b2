//! Rules as the server checks them: validated from their stored strings and compiled, every
//! kind to a `regex` (a keyword is its escaped text, matched case-insensitively), with a size
//! limit so a pattern cannot make the server build a huge automaton.

use regex::{Regex, RegexBuilder};
use weft_storage::ModerationRule;

/// Longest pattern accepted, in characters.
pub const MAX_PATTERN: usize = 1000;
/// Compiled size limit of one rule's regex, in bytes (the `regex` crate's `size_limit`).
const REGEX_SIZE: usize = 256 * 1024;
/// Output held back for regex rules, in bytes: a regex match longer than this may be partly
/// delivered before it completes (keywords hold back their own length, so they never are).
pub const REGEX_HOLD: usize = 64;
/// How far back in the output a regex rule is matched, in bytes (the output is not rescanned
/// from its start at every token).
pub const REGEX_WINDOW: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Block,
    Flag,
}

/// One compiled rule.
#[derive(Debug)]
pub struct Rule {
    pub id: String,
    pub action: Action,
    pub input: bool,
    pub output: bool,
    re: Regex,
    /// How many bytes of output may still be the start of a match.
    hold: usize,
    /// How far back a match may start, in bytes, relative to the newest text.
    window: usize,
}

/// The rules in force, with what the output filter needs to know about them.
#[derive(Debug, Default)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    /// The stored rows they came from (to tell whether a reload changed anything).
    pub source: Vec<ModerationRule>,
}

/// A rule's fields, checked: `Err` names the problem (the message of a 400).
pub fn check(pattern: &str, kind: &str, action: &str, applies_to: &str) -> Result<(), String> {
    compile_parts("check", pattern, kind, action, applies_to).map(drop)
}

/// Compiles a stored rule.
pub fn compile(r: &ModerationRule) -> Result<Rule, String> {
    compile_parts(&r.id, &r.pattern, &r.kind, &r.action, &r.applies_to)
}

fn compile_parts(
    id: &str,
    pattern: &str,
    kind: &str,
    action: &str,
    applies_to: &str,
) -> Result<Rule, String> {
    let action = match action {
        "block" => Action::Block,
        "flag" => Action::Flag,
        a => return Err(format!("unknown action {a:?}: use block or flag")),
    };
    let (input, output) = match applies_to {
        "input" => (true, false),
        "output" => (false, true),
        "both" => (true, true),
        a => {
            return Err(format!(
                "unknown applies_to {a:?}: use input, output or both"
            ))
        }
    };
    if pattern.trim().is_empty() || pattern.chars().count() > MAX_PATTERN {
        return Err(format!(
            "pattern must be 1 to {MAX_PATTERN} characters and not blank"
        ));
    }
    let (source, hold, window) = match kind {
        "keyword" => {
            let n = pattern.len();
            (format!("(?i){}", regex::escape(pattern)), n, n)
        }
        "regex" => (pattern.to_string(), REGEX_HOLD, REGEX_WINDOW),
        k => return Err(format!("unknown kind {k:?}: use keyword or regex")),
    };
    let re = RegexBuilder::new(&source)
        .size_limit(REGEX_SIZE)
        .dfa_size_limit(REGEX_SIZE)
        .build()
        .map_err(|e| format!("invalid regex: {e}"))?;
    if kind == "regex" && re.is_match("") {
        return Err("the regex matches empty text, so it would match everything".into());
    }
    Ok(Rule {
        id: id.to_string(),
        action,
        input,
        output,
        re,
        hold,
        window,
    })
}

/// A match: the rule and where it starts (a byte offset into the text searched).
#[derive(Clone, Copy, Debug)]
pub struct Hit<'a> {
    pub rule: &'a Rule,
    pub start: usize,
}

impl RuleSet {
    /// Compiles stored rules; one that no longer compiles (stored by an older version with
    /// other limits) is skipped with a warning rather than disabling moderation.
    pub fn new(source: Vec<ModerationRule>) -> RuleSet {
        let rules = source
            .iter()
            .filter_map(|r| match compile(r) {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::warn!(rule = %r.id, error = %e, "skipping a moderation rule");
                    None
                }
            })
            .collect();
        RuleSet { rules, source }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn has_output(&self) -> bool {
        self.rules.iter().any(|r| r.output)
    }

    /// Output bytes to hold back: the most any output rule needs.
    pub fn hold(&self) -> usize {
        self.output().map(|r| r.hold).max().unwrap_or(0)
    }

    fn output(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(|r| r.output)
    }

    /// Every input rule that matches `text`.
    pub fn input_hits<'a>(&'a self, text: &str) -> Vec<Hit<'a>> {
        hits(self.rules.iter().filter(|r| r.input), text, 0)
    }

    /// Every output rule that matches in `text[from..]`, each rule's own window allowing (a
    /// keyword is looked for only where it could end in the new text).
    pub fn output_hits<'a>(&'a self, text: &str, new_from: usize) -> Vec<Hit<'a>> {
        let mut out = Vec::new();
        for r in self.output() {
            let from = floor_char(text, new_from.saturating_sub(r.window));
            out.extend(hits(std::iter::once(r), text, from));
        }
        out
    }
}

fn hits<'a>(rules: impl Iterator<Item = &'a Rule>, text: &str, from: usize) -> Vec<Hit<'a>> {
    rules
        .filter_map(|rule| {
            rule.re.find(&text[from..]).map(|m| Hit {
                rule,
                start: from + m.start(),
            })
        })
        .collect()
}

/// The largest char boundary at or below `i`.
pub fn floor_char(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(pattern: &str, kind: &str, action: &str, applies_to: &str) -> ModerationRule {
        ModerationRule {
            id: "r".into(),
            pattern: pattern.into(),
            kind: kind.into(),
            action: action.into(),
            applies_to: applies_to.into(),
            created_at: 0,
        }
    }

    #[test]
    fn bad_rules_name_their_problem() {
        assert!(check("(", "regex", "block", "input")
            .unwrap_err()
            .contains("invalid regex"));
        assert!(check("a{1000}{1000}", "regex", "block", "input")
            .unwrap_err()
            .contains("invalid regex"));
        assert!(check("x*", "regex", "block", "input")
            .unwrap_err()
            .contains("empty"));
        assert!(check("x", "glob", "block", "input")
            .unwrap_err()
            .contains("kind"));
        assert!(check("x", "keyword", "warn", "input")
            .unwrap_err()
            .contains("action"));
        assert!(check("x", "keyword", "flag", "all")
            .unwrap_err()
            .contains("applies_to"));
        assert!(check(" ", "keyword", "flag", "both").is_err());
        assert!(check("a.b", "keyword", "flag", "both").is_ok());
    }

    #[test]
    fn keywords_are_literal_and_case_insensitive() {
        let set = RuleSet::new(vec![rule("a.b", "keyword", "block", "both")]);
        assert_eq!(set.input_hits("xx A.B yy").len(), 1);
        assert!(set.input_hits("axb").is_empty());
        assert_eq!(set.hold(), 3);
        // Only where the keyword could end in the new text: from 7 - 3.
        assert_eq!(set.output_hits("a.b and a.", 7).len(), 0);
        assert_eq!(set.output_hits("a.b and a.b", 7)[0].start, 8);
    }
}
