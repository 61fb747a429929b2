//! Splitting text on special tokens before the main algorithm runs (llama.cpp's
//! `tokenizer_st_partition`). Control and unknown tokens are recognised only when special
//! parsing is on; user-defined tokens always are. Tokens are applied longest text first, each
//! over every remaining text fragment, left to right.
//!
//! A byte trie over all special texts finds which of them occur in the input at all, so the
//! exact (but per-token) splitting loop only runs for those few.

use super::table::TextTable;
use super::vocab::attr;

/// A piece of the input: raw text (a byte range) or an already decided token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    Text(usize, usize),
    Token(u32),
}

#[derive(Clone, Debug, Default)]
struct Node {
    children: Vec<(u8, u32)>,
    /// (token id, rank in the longest-first order) of a text ending here.
    token: Option<(u32, u32)>,
}

/// The special tokens of a vocabulary, ready for partitioning.
#[derive(Clone, Debug, Default)]
pub(crate) struct SpecialMatcher {
    /// Special token ids, longest text first (ties by id).
    order: Vec<u32>,
    nodes: Vec<Node>,
}

impl SpecialMatcher {
    pub fn build(texts: &TextTable, attrs: &[u16]) -> Self {
        let mut order: Vec<u32> = (0..attrs.len() as u32)
            .filter(|&id| {
                attrs[id as usize] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
            })
            .collect();
        order.sort_by(|&a, &b| {
            texts
                .text(b)
                .len()
                .cmp(&texts.text(a).len())
                .then(a.cmp(&b))
        });
        let mut m = SpecialMatcher {
            order,
            nodes: vec![Node::default()],
        };
        for rank in 0..m.order.len() {
            let id = m.order[rank];
            let mut node = 0usize;
            for &b in texts.text(id) {
                node = match m.nodes[node].children.iter().find(|c| c.0 == b) {
                    Some(&(_, next)) => next as usize,
                    None => {
                        let next = m.nodes.len();
                        m.nodes.push(Node::default());
                        m.nodes[node].children.push((b, next as u32));
                        next
                    }
                };
            }
            // Duplicate texts: keep the first (longest-first order makes them adjacent).
            if m.nodes[node].token.is_none() {
                m.nodes[node].token = Some((id, rank as u32));
            }
        }
        m
    }

    /// Special tokens (rank, id) that occur somewhere in `text` and may be used.
    fn candidates(&self, text: &[u8], attrs: &[u16], parse_special: bool) -> Vec<(u32, u32)> {
        let mut found = Vec::new();
        for start in 0..text.len() {
            let mut node = 0usize;
            for &b in &text[start..] {
                match self.nodes[node].children.iter().find(|c| c.0 == b) {
                    Some(&(_, next)) => node = next as usize,
                    None => break,
                }
                if let Some((id, rank)) = self.nodes[node].token {
                    let a = attrs[id as usize];
                    if parse_special || a & (attr::CONTROL | attr::UNKNOWN) == 0 {
                        found.push((rank, id));
                    }
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }

    /// Splits `text` into raw fragments and special tokens.
    pub fn partition(
        &self,
        texts: &TextTable,
        attrs: &[u16],
        text: &str,
        parse_special: bool,
    ) -> Vec<Fragment> {
        if text.is_empty() {
            return Vec::new();
        }
        let mut frags = vec![Fragment::Text(0, text.len())];
        let bytes = text.as_bytes();
        for (_, id) in self.candidates(bytes, attrs, parse_special) {
            let tok = texts.text(id);
            let a = attrs[id as usize];
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Fragment::Text(mut start, end) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(pos) = find(&bytes[start..end], tok) {
                    let m = start + pos;
                    let mut left_end = m;
                    if a & attr::LSTRIP != 0 {
                        while left_end > start && bytes[left_end - 1].is_ascii_whitespace() {
                            left_end -= 1;
                        }
                    }
                    if left_end > start {
                        next.push(Fragment::Text(start, left_end));
                    }
                    next.push(Fragment::Token(id));
                    start = m + tok.len();
                    if a & attr::RSTRIP != 0 {
                        while start < end && bytes[start].is_ascii_whitespace() {
                            start += 1;
                        }
                    }
                }
                if start < end {
                    next.push(Fragment::Text(start, end));
                }
            }
            frags = next;
        }
        frags
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    let first = needle[0];
    (0..=hay.len() - needle.len())
        .find(|&i| hay[i] == first && &hay[i..i + needle.len()] == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (TextTable, Vec<u16>) {
        let mut t = TextTable::with_capacity(8, 64);
        let mut a = Vec::new();
        for (s, at) in [
            ("a", attr::NORMAL),
            ("<s>", attr::CONTROL),
            ("<tool>", attr::USER_DEFINED),
            ("<tool>x", attr::CONTROL),
        ] {
            t.push(s.as_bytes());
            a.push(at);
        }
        (t, a)
    }

    #[test]
    fn control_only_when_parsing_user_defined_always() {
        let (t, a) = setup();
        let m = SpecialMatcher::build(&t, &a);
        let text = "hi<s>yo<tool>x<tool>";
        assert_eq!(
            m.partition(&t, &a, text, true),
            vec![
                Fragment::Text(0, 2),
                Fragment::Token(1),
                Fragment::Text(5, 7),
                Fragment::Token(3),
                Fragment::Token(2),
            ]
        );
        assert_eq!(
            m.partition(&t, &a, text, false),
            vec![
                Fragment::Text(0, 7),
                Fragment::Token(2),
                Fragment::Text(13, 14),
                Fragment::Token(2),
            ]
        );
        assert!(m.partition(&t, &a, "", true).is_empty());
    }
}
