//! An incremental JSON acceptor: fed output bytes one at a time, it says whether they are still
//! a prefix of a JSON value conforming to a [`JsonSchema`], and when the value is complete.
//!
//! It is a pushdown automaton over bytes with a stack of frames (object, array, string, number,
//! literal). Where the schema allows several shapes (`anyOf`, `enum`, type lists) it follows
//! every alternative at once, dropping the ones a byte rules out, so it needs no lookahead.
//! Whitespace between tokens is allowed but a run of it is capped, so a model cannot pad
//! forever.

use std::sync::Arc;

use super::json_schema::{JsonSchema, Node, ANY, ANY_ARRAY, ANY_OBJECT, FALSE, NULL, TRUE};
use super::numbers::NumState;
use super::string_rule::{StrByte, StrMatch};

/// Longest run of whitespace allowed between JSON tokens.
const MAX_WS_RUN: u8 = 24;
/// Bound on nested `anyOf` / `$ref` expansion (a reference cycle without progress).
const MAX_EXPAND: usize = 32;

#[derive(Clone, Debug, PartialEq)]
enum ObjState {
    /// After `{`: a key or `}`.
    Open,
    /// After a key: `:` then the value of property `Some(i)` (or an additional one).
    Colon(Option<usize>),
    /// After a member: `,` or `}`.
    Member,
    /// After `,`: a key.
    Comma,
}

#[derive(Clone, Debug, PartialEq)]
enum ArrState {
    Open,
    Item,
    Comma,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Esc {
    None,
    Backslash,
    /// Hex digits still expected after `\u`.
    Hex(u8),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
}

#[derive(Clone, Debug, PartialEq)]
enum Frame {
    /// A value of this node is expected next.
    Value(u32),
    Obj {
        node: u32,
        seen: Vec<bool>,
        st: ObjState,
    },
    /// Inside an object key (the object frame is below).
    Key {
        buf: Vec<u8>,
        esc: Esc,
        utf8: u8,
    },
    Arr {
        node: u32,
        count: usize,
        st: ArrState,
    },
    Str {
        esc: Esc,
        utf8: u8,
    },
    Num {
        st: Num,
        integer: bool,
    },
    Lit {
        node: u32,
        pos: usize,
    },
    /// Inside a string with a pattern / format / length rule (`JsonSchema::strings[rule]`).
    Text {
        rule: u32,
        m: StrMatch,
    },
    /// A number with bounds (`JsonSchema::numbers[rule]`).
    Bounded {
        rule: u32,
        st: NumState,
    },
}

/// Whether `n` may end in this state.
fn num_done(n: Num) -> bool {
    matches!(n, Num::Zero | Num::Int | Num::Frac | Num::Exp)
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The acceptor state (cheap to clone: a few small stacks).
#[derive(Clone, Debug)]
pub struct JsonAcceptor {
    schema: Arc<JsonSchema>,
    /// Live alternatives; each a stack of frames (empty = a complete value).
    alts: Vec<Vec<Frame>>,
    ws_run: u8,
}

impl JsonAcceptor {
    /// Expects one value of `schema`.
    pub fn new(schema: Arc<JsonSchema>) -> Self {
        let root = schema.root;
        JsonAcceptor {
            schema,
            alts: vec![vec![Frame::Value(root)]],
            ws_run: 0,
        }
    }

    /// Whether the bytes so far form a complete value (nothing more may follow).
    pub fn is_complete(&self) -> bool {
        self.alts.iter().any(Vec::is_empty)
    }

    /// Whether the output may end here: a complete value, or a top-level number that could
    /// go on but need not.
    pub fn can_end(&self) -> bool {
        self.alts.iter().any(|a| match a.as_slice() {
            [] => true,
            [Frame::Num { st, .. }] => num_done(*st),
            [Frame::Bounded { rule, st }] => self.schema.numbers[*rule as usize].can_end(st),
            _ => false,
        })
    }

    /// Feeds bytes; false (and the state unchanged) when they break the grammar.
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        match self.try_feed(bytes) {
            Some(next) => {
                *self = next;
                true
            }
            None => false,
        }
    }

    /// The state after `bytes`, or None when they break the grammar. Empty input is refused
    /// (a token that adds nothing makes no progress).
    pub fn try_feed(&self, bytes: &[u8]) -> Option<JsonAcceptor> {
        if bytes.is_empty() {
            return None;
        }
        let mut next = self.clone();
        for &b in bytes {
            if !next.push(b) {
                return None;
            }
        }
        Some(next)
    }

    /// Whether one byte is accepted, without changing the state.
    pub fn accepts_byte(&self, b: u8) -> bool {
        self.clone().push(b)
    }

    /// One byte; on refusal the state is no longer meaningful (callers work on a clone).
    fn push(&mut self, b: u8) -> bool {
        if is_ws(b) && self.ws_run >= MAX_WS_RUN {
            return false;
        }
        let schema = self.schema.clone();
        let mut out: Vec<Vec<Frame>> = Vec::with_capacity(self.alts.len());
        let mut todo: Vec<Vec<Frame>> = std::mem::take(&mut self.alts);
        // Each `Again` pops a finished number or pushes an item, so a byte settles in a few
        // rounds; the bound only guards against a bug looping forever.
        let mut rounds = 0;
        while let Some(alt) = todo.pop() {
            rounds += 1;
            if rounds > 4096 {
                break;
            }
            for mut a in expand(&schema, alt) {
                match step(&schema, &mut a, b) {
                    Step::No => {}
                    Step::Yes => {
                        if !out.contains(&a) {
                            out.push(a);
                        }
                    }
                    Step::Again => todo.push(a),
                }
            }
        }
        if out.is_empty() {
            return false;
        }
        self.alts = out;
        // Whitespace inside strings is content, not padding.
        let in_string = self.alts.iter().all(|a| {
            matches!(
                a.last(),
                Some(Frame::Str { .. } | Frame::Key { .. } | Frame::Text { .. })
            )
        });
        self.ws_run = if is_ws(b) && !in_string {
            self.ws_run + 1
        } else {
            0
        };
        true
    }
}

/// Replaces a `Value(union)` on top of the stack by one alternative per member.
fn expand(schema: &JsonSchema, alt: Vec<Frame>) -> Vec<Vec<Frame>> {
    let mut done = Vec::new();
    let mut todo = vec![(alt, 0usize)];
    while let Some((a, depth)) = todo.pop() {
        match a.last() {
            Some(Frame::Value(n)) if depth < MAX_EXPAND => {
                if let Node::Union(members) = &schema.nodes[*n as usize] {
                    for &m in members.iter().rev() {
                        let mut b = a.clone();
                        *b.last_mut().unwrap() = Frame::Value(m);
                        todo.push((b, depth + 1));
                    }
                    continue;
                }
                done.push(a);
            }
            Some(Frame::Value(_)) => {}
            _ => done.push(a),
        }
    }
    done
}

/// What one byte did to an alternative.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    /// Not allowed.
    No,
    /// Consumed.
    Yes,
    /// Not consumed yet: the stack changed (a number ended, an array item begins) and the
    /// byte goes to the new top.
    Again,
}

/// A number ended at a byte that does not continue it: the byte belongs to what encloses the
/// number (nothing does at the top level, so there it is refused).
fn number_ended(stack: &mut Vec<Frame>) -> Step {
    stack.pop();
    if stack.is_empty() {
        Step::No
    } else {
        Step::Again
    }
}

fn yes(ok: bool) -> Step {
    if ok {
        Step::Yes
    } else {
        Step::No
    }
}

/// Advances one alternative by one byte.
fn step(schema: &JsonSchema, stack: &mut Vec<Frame>, b: u8) -> Step {
    let Some(top) = stack.last_mut() else {
        // A complete value: nothing may follow.
        return Step::No;
    };
    match top {
        Frame::Value(n) => {
            if is_ws(b) {
                return Step::Yes;
            }
            let node = *n;
            let Some(f) = start(schema, node, b) else {
                return Step::No;
            };
            *stack.last_mut().unwrap() = f;
            if let Some(Frame::Lit { node, pos }) = stack.last() {
                if lit_len(schema, *node) == *pos {
                    stack.pop();
                }
            }
            Step::Yes
        }
        Frame::Str { esc, utf8 } => match string_byte(esc, utf8, b) {
            StrStep::Bad => Step::No,
            StrStep::More => Step::Yes,
            StrStep::End => {
                stack.pop();
                Step::Yes
            }
        },
        Frame::Text { rule, m } => match schema.strings[*rule as usize].byte(m, b) {
            StrByte::Bad => Step::No,
            StrByte::More => Step::Yes,
            StrByte::End => {
                stack.pop();
                Step::Yes
            }
        },
        Frame::Bounded { rule, st } => {
            let r = &schema.numbers[*rule as usize];
            match r.byte(st, b) {
                Some(n) => {
                    *st = n;
                    Step::Yes
                }
                None if r.can_end(st) => number_ended(stack),
                None => Step::No,
            }
        }
        Frame::Key { buf, esc, utf8 } => match string_byte(esc, utf8, b) {
            StrStep::Bad => Step::No,
            StrStep::More => {
                buf.push(b);
                let buf = buf.clone();
                yes(key_prefix_ok(schema, stack, &buf))
            }
            StrStep::End => match stack.pop() {
                Some(Frame::Key { buf, .. }) => yes(key_done(schema, stack, &buf)),
                _ => Step::No,
            },
        },
        Frame::Num { st, integer } => match num_byte(*st, *integer, b) {
            Some(n) => {
                *st = n;
                Step::Yes
            }
            None if num_done(*st) => number_ended(stack),
            None => Step::No,
        },
        Frame::Lit { node, pos } => {
            let text = lit_text(schema, *node);
            if text.get(*pos) != Some(&b) {
                return Step::No;
            }
            *pos += 1;
            if *pos == text.len() {
                stack.pop();
            }
            Step::Yes
        }
        Frame::Arr { node, count, st } => {
            if is_ws(b) {
                return Step::Yes;
            }
            let (item, min, max) = match &schema.nodes[*node as usize] {
                Node::Array {
                    prefix,
                    items,
                    min,
                    max,
                } => (*prefix.get(*count).unwrap_or(items), *min, *max),
                _ => (ANY, 0, None),
            };
            let room = max.is_none_or(|m| *count < m);
            match (st.clone(), b) {
                (ArrState::Open | ArrState::Item, b']') => {
                    let ok = *count >= min;
                    if ok {
                        stack.pop();
                    }
                    yes(ok)
                }
                (ArrState::Item, b',') if room => {
                    *st = ArrState::Comma;
                    Step::Yes
                }
                (ArrState::Open | ArrState::Comma, _) if room => {
                    *count += 1;
                    *st = ArrState::Item;
                    // The byte starts the item.
                    stack.push(Frame::Value(item));
                    Step::Again
                }
                _ => Step::No,
            }
        }
        Frame::Obj { node, seen, st } => {
            if is_ws(b) {
                return Step::Yes;
            }
            let node = *node;
            match (st.clone(), b) {
                (ObjState::Open | ObjState::Comma, b'"') => {
                    stack.push(Frame::Key {
                        buf: Vec::new(),
                        esc: Esc::None,
                        utf8: 0,
                    });
                    // Some key must be possible at all.
                    yes(key_prefix_ok(schema, stack, &[]))
                }
                (ObjState::Open | ObjState::Member, b'}') => {
                    let ok = match &schema.nodes[node as usize] {
                        Node::Object { required, .. } => required.iter().all(|&i| seen[i]),
                        _ => true,
                    };
                    if ok {
                        stack.pop();
                    }
                    yes(ok)
                }
                (ObjState::Member, b',') => {
                    if !more_keys_possible(schema, node, seen) {
                        return Step::No;
                    }
                    *st = ObjState::Comma;
                    Step::Yes
                }
                (ObjState::Colon(p), b':') => {
                    let value = match (&schema.nodes[node as usize], p) {
                        (Node::Object { props, .. }, Some(i)) => {
                            seen[i] = true;
                            props[i].1
                        }
                        (Node::Object { additional, .. }, None) => additional.unwrap_or(ANY),
                        _ => ANY,
                    };
                    *st = ObjState::Member;
                    stack.push(Frame::Value(value));
                    Step::Yes
                }
                _ => Step::No,
            }
        }
    }
}

/// The frame a value of `node` starts with when its first byte is `b`.
fn start(schema: &JsonSchema, node: u32, b: u8) -> Option<Frame> {
    match &schema.nodes[node as usize] {
        Node::Any => match b {
            b'{' => start(schema, ANY_OBJECT, b),
            b'[' => start(schema, ANY_ARRAY, b),
            b'"' => start_string(b),
            b'-' | b'0'..=b'9' => start_number(false, b),
            b't' | b'f' | b'n' => {
                let node = match b {
                    b't' => TRUE,
                    b'f' => FALSE,
                    _ => NULL,
                };
                Some(Frame::Lit { node, pos: 1 })
            }
            _ => None,
        },
        Node::Object { props, .. } => (b == b'{').then(|| Frame::Obj {
            node,
            seen: vec![false; props.len()],
            st: ObjState::Open,
        }),
        Node::Array { .. } => (b == b'[').then_some(Frame::Arr {
            node,
            count: 0,
            st: ArrState::Open,
        }),
        Node::String(None) => start_string(b),
        Node::String(Some(rule)) => (b == b'"').then(|| Frame::Text {
            rule: *rule,
            m: schema.strings[*rule as usize].start(),
        }),
        Node::Number(integer, None) => start_number(*integer, b),
        Node::Number(_, Some(rule)) => schema.numbers[*rule as usize]
            .start(b)
            .map(|st| Frame::Bounded { rule: *rule, st }),
        Node::Literal(t) => (t.first() == Some(&b)).then_some(Frame::Lit { node, pos: 1 }),
        Node::Union(_) => None,
    }
}

fn start_string(b: u8) -> Option<Frame> {
    (b == b'"').then_some(Frame::Str {
        esc: Esc::None,
        utf8: 0,
    })
}

fn start_number(integer: bool, b: u8) -> Option<Frame> {
    let st = match b {
        b'-' => Num::Minus,
        b'0' => Num::Zero,
        b'1'..=b'9' => Num::Int,
        _ => return None,
    };
    Some(Frame::Num { st, integer })
}

fn num_byte(st: Num, integer: bool, b: u8) -> Option<Num> {
    Some(match (st, b) {
        (Num::Minus, b'0') => Num::Zero,
        (Num::Minus, b'1'..=b'9') => Num::Int,
        (Num::Int, b'0'..=b'9') => Num::Int,
        (Num::Zero | Num::Int, b'.') if !integer => Num::Dot,
        (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') if !integer => Num::E,
        (Num::Dot | Num::Frac, b'0'..=b'9') => Num::Frac,
        (Num::E, b'+' | b'-') => Num::ESign,
        (Num::E | Num::ESign | Num::Exp, b'0'..=b'9') => Num::Exp,
        _ => return None,
    })
}

enum StrStep {
    Bad,
    More,
    End,
}

/// One byte inside a string: escapes, UTF-8 sequences, no control characters.
fn string_byte(esc: &mut Esc, utf8: &mut u8, b: u8) -> StrStep {
    match *esc {
        Esc::Backslash => {
            *esc = match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Esc::None,
                b'u' => Esc::Hex(4),
                _ => return StrStep::Bad,
            };
            return StrStep::More;
        }
        Esc::Hex(n) => {
            if !b.is_ascii_hexdigit() {
                return StrStep::Bad;
            }
            *esc = if n == 1 { Esc::None } else { Esc::Hex(n - 1) };
            return StrStep::More;
        }
        Esc::None => {}
    }
    if *utf8 > 0 {
        if b & 0xC0 != 0x80 {
            return StrStep::Bad;
        }
        *utf8 -= 1;
        return StrStep::More;
    }
    match b {
        b'"' => StrStep::End,
        b'\\' => {
            *esc = Esc::Backslash;
            StrStep::More
        }
        0x00..=0x1F | 0x7F => StrStep::Bad,
        0x20..=0x7E => StrStep::More,
        0xC2..=0xDF => {
            *utf8 = 1;
            StrStep::More
        }
        0xE0..=0xEF => {
            *utf8 = 2;
            StrStep::More
        }
        0xF0..=0xF4 => {
            *utf8 = 3;
            StrStep::More
        }
        _ => StrStep::Bad,
    }
}

/// The object frame under the key being read: (node, seen).
fn enclosing_object(stack: &[Frame]) -> Option<(u32, &[bool])> {
    match stack.iter().rev().nth(1) {
        Some(Frame::Obj { node, seen, .. }) => Some((*node, seen)),
        _ => None,
    }
}

/// Whether `buf` (raw key bytes so far) can still become an allowed key.
fn key_prefix_ok(schema: &JsonSchema, stack: &[Frame], buf: &[u8]) -> bool {
    let Some((node, seen)) = enclosing_object(stack) else {
        return false;
    };
    match &schema.nodes[node as usize] {
        Node::Object {
            props, additional, ..
        } => {
            additional.is_some()
                || props
                    .iter()
                    .zip(seen)
                    .any(|((name, _), &s)| !s && name.as_bytes().starts_with(buf))
        }
        _ => true,
    }
}

/// A key ended (its frame popped): records which property it names.
fn key_done(schema: &JsonSchema, stack: &mut [Frame], buf: &[u8]) -> bool {
    let Some(Frame::Obj { node, seen, st }) = stack.last_mut() else {
        return false;
    };
    let (props, additional) = match &schema.nodes[*node as usize] {
        Node::Object {
            props, additional, ..
        } => (props, additional),
        _ => return false,
    };
    match props.iter().position(|(n, _)| n.as_bytes() == buf) {
        Some(i) if !seen[i] => {
            *st = ObjState::Colon(Some(i));
            true
        }
        Some(_) => false,
        None if additional.is_some() => {
            *st = ObjState::Colon(None);
            true
        }
        None => false,
    }
}

/// Whether another key may follow (some property unseen, or additional keys allowed).
fn more_keys_possible(schema: &JsonSchema, node: u32, seen: &[bool]) -> bool {
    match &schema.nodes[node as usize] {
        Node::Object { additional, .. } => additional.is_some() || seen.iter().any(|s| !s),
        _ => true,
    }
}

fn lit_text(schema: &JsonSchema, node: u32) -> &[u8] {
    match &schema.nodes[node as usize] {
        Node::Literal(t) => t,
        _ => &[],
    }
}

fn lit_len(schema: &JsonSchema, node: u32) -> usize {
    lit_text(schema, node).len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn acc(schema: serde_json::Value) -> JsonAcceptor {
        JsonAcceptor::new(Arc::new(JsonSchema::compile(&schema).unwrap()))
    }

    /// Feeds `text` byte by byte; returns how many bytes were accepted.
    fn run(a: &mut JsonAcceptor, text: &str) -> usize {
        for (i, b) in text.bytes().enumerate() {
            if !a.feed(&[b]) {
                return i;
            }
        }
        text.len()
    }

    #[test]
    fn any_value_accepts_valid_json_and_completes_at_its_end() {
        for text in [
            r#"{"a": [1, -2.5e+3, true, false, null, "x\"y\u00e9\n"], "b": {}}"#,
            "[]",
            "[ {\"k\" : [ [ ] ] } ]",
            "\"caf\u{e9} \u{1F600}\"",
            "{\"\": 0}",
        ] {
            let mut a = JsonAcceptor::new(Arc::new(JsonSchema::any_value()));
            assert_eq!(run(&mut a, text), text.len(), "{text}");
            assert!(a.is_complete(), "{text}");
            assert!(!a.feed(b" "), "nothing follows a complete value");
            serde_json::from_str::<serde_json::Value>(text).unwrap();
        }
    }

    #[test]
    fn invalid_json_is_refused_where_it_breaks() {
        for (text, ok) in [
            ("{'a': 1}", 1),
            ("[1,]", 3),
            ("[01]", 2),
            ("{\"a\" 1}", 5),
            ("[tru e]", 4),
            ("\"a\u{1}\"", 2),
            ("[1.]", 3),
            ("[-]", 2),
            ("\"\\x\"", 2),
        ] {
            let mut a = JsonAcceptor::new(Arc::new(JsonSchema::any_value()));
            assert_eq!(run(&mut a, text), ok, "{text}");
        }
    }

    #[test]
    fn object_mode_needs_an_object() {
        let mut a = JsonAcceptor::new(Arc::new(JsonSchema::any_object()));
        assert!(!a.feed(b"["));
        assert!(a.feed(b"  {"));
        assert!(!a.is_complete());
        assert!(a.feed(b"}"));
        assert!(a.is_complete());
    }

    #[test]
    fn schema_properties_required_and_types() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"enum": ["a", "bc"]}, "maxItems": 2},
            "ok": {"type": "boolean"}, "score": {"type": ["number", "null"]}},
            "required": ["name", "age"]});
        let good = r#"{"age": 3, "name": "x", "tags": ["bc", "a"], "ok": true, "score": null}"#;
        let mut a = acc(schema.clone());
        assert_eq!(run(&mut a, good), good.len());
        assert!(a.is_complete());
        for (text, ok) in [
            (r#"{"name": "x"}"#, 12),             // age missing: no `}`
            (r#"{"nam": 1}"#, 5),                 // not a property
            (r#"{"age": 3.5}"#, 9),               // integer
            (r#"{"age": 1, "age": 2}"#, 12),      // repeated key
            (r#"{"tags": ["b"]}"#, 12),           // enum
            (r#"{"tags": ["a", "a", "a"]}"#, 18), // maxItems
            (r#"{"ok": 1}"#, 7),
            (r#"{"score": "1"}"#, 10),
        ] {
            let mut a = acc(schema.clone());
            assert_eq!(run(&mut a, text), ok, "{text}");
        }
    }

    #[test]
    fn numbers_end_at_the_enclosing_delimiter_and_top_level_numbers_may_end() {
        let mut a = acc(json!({"type": "array", "items": {"type": "number"}, "minItems": 2}));
        assert_eq!(run(&mut a, "[10,2.5e3]"), 10);
        assert!(a.is_complete());
        let mut a = acc(json!({"type": "array", "minItems": 2}));
        assert_eq!(run(&mut a, "[1]"), 2, "minItems");
        let mut a = acc(json!({"type": "integer"}));
        assert_eq!(run(&mut a, "-12"), 3);
        assert!(a.can_end() && !a.is_complete());
    }

    #[test]
    fn enum_alternatives_sharing_a_prefix_both_survive() {
        let mut a = acc(json!({"enum": ["ab", "ac", 1, 10]}));
        assert_eq!(run(&mut a, "\"ac\""), 4);
        assert!(a.is_complete());
        let mut a = acc(json!({"enum": [1, 10]}));
        assert!(a.feed(b"1"));
        assert!(a.is_complete(), "1 is complete");
        assert!(a.feed(b"0"), "10 is still possible");
    }

    #[test]
    fn refs_and_recursion() {
        let schema = json!({"$defs": {"node": {"type": "object",
            "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "required": ["v"]}}, "$ref": "#/$defs/node"});
        let text = r#"{"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3}]}"#;
        let mut a = acc(schema);
        assert_eq!(run(&mut a, text), text.len());
        assert!(a.is_complete());
    }

    #[test]
    fn whitespace_runs_are_capped_outside_strings() {
        let mut a = JsonAcceptor::new(Arc::new(JsonSchema::any_object()));
        assert!(a.feed(b"{"));
        assert!(a.feed(&[b' '; MAX_WS_RUN as usize]));
        assert!(!a.feed(b" "));
        assert!(a.feed(b"\""));
        assert!(a.feed(&[b' '; 100]), "spaces inside a string are content");
    }

    #[test]
    fn constrained_leaves_inside_objects_and_arrays() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 10, "maximum": 12},
            "code": {"type": "string", "pattern": "^[A-Z]{2}\\d$"},
            "day": {"type": "string", "format": "date"},
            "xs": {"type": "array", "items": {"type": "number", "exclusiveMaximum": 0}, "maxItems": 2},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false}},
            "required": ["n"]});
        let good = r#"{"n": 11, "code": "AB7", "day": "2024-02-29", "xs": [-1.5, -0.01], "pair": [1, "a"]}"#;
        let mut a = acc(schema.clone());
        assert_eq!(run(&mut a, good), good.len());
        assert!(a.is_complete());
        for (text, ok) in [
            (r#"{"n": 13"#, 7),                 // 1 then only 0..2
            (r#"{"n": 1}"#, 7),                 // 1 is below 10: no `}` yet
            (r#"{"n": -"#, 6),                  // no negatives
            (r#"{"n": 10, "code": "A1"#, 20),   // second char must be a letter
            (r#"{"n": 10, "code": "AB7x"#, 22), // then only the quote
            (r#"{"n": 10, "day": "2024-13"#, 24),
            (r#"{"n": 10, "xs": [0"#, 17), // 0 and above are out; -0 too
            (r#"{"n": 10, "xs": [-1, -2, -3"#, 23), // maxItems in a nested array
            (r#"{"n": 10, "pair": ["a"#, 19), // first item an integer
            (r#"{"n": 10, "pair": [1, "a", 2"#, 25),
        ] {
            let mut a = acc(schema.clone());
            assert_eq!(run(&mut a, text), ok, "{text}");
        }
        // Optional[int] as pydantic writes it.
        let mut a = acc(json!({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]}));
        assert_eq!(run(&mut a, "null"), 4);
        assert!(a.is_complete());
        let mut a = acc(json!({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]}));
        assert_eq!(run(&mut a, "0"), 0);
        assert_eq!(run(&mut a, "7"), 1);
        assert!(a.can_end());
    }

    #[test]
    fn refused_bytes_leave_the_state_unchanged() {
        let mut a = acc(json!({"type": "object", "properties": {"a": {"type": "string"}}}));
        assert!(a.feed(b"{\"a\":"));
        assert!(!a.feed(b"1"));
        assert!(a.feed(b"\"x\"}"));
        assert!(a.is_complete());
    }
}
