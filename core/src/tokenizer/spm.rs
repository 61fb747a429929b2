//! SentencePiece-style BPE over token scores (`tokenizer.ggml.model = llama`), as llama.cpp
//! runs it: start from UTF-8 characters, repeatedly merge the adjacent pair whose
//! concatenation is the highest-scoring vocabulary token (ties: leftmost), then emit each
//! symbol's token or, failing that, its bytes as `<0xXX>` tokens.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::vocab::GgufVocab;

struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    /// Greatest = highest score, then smallest left position.
    fn cmp(&self, o: &Self) -> Ordering {
        self.score
            .total_cmp(&o.score)
            .then_with(|| o.left.cmp(&self.left))
    }
}

struct Sym {
    start: usize,
    len: usize,
    prev: isize,
    next: isize,
}

/// The id for one raw byte: `<0xXX>`, else the byte as a one-character token, else unknown.
pub(crate) fn byte_token(v: &GgufVocab, b: u8) -> Option<u32> {
    let name = format!("<0x{b:02X}>");
    v.token_id(name.as_bytes())
        .or_else(|| v.token_id(&[b]))
        .or(v.unk)
}

/// Appends the ids for `text` (spaces already escaped to U+2581) to `out`.
pub(crate) fn encode(v: &GgufVocab, text: &str, out: &mut Vec<u32>) {
    let bytes = text.as_bytes();
    let mut syms: Vec<Sym> = Vec::with_capacity(text.len());
    for (i, (start, c)) in text.char_indices().enumerate() {
        syms.push(Sym {
            start,
            len: c.len_utf8(),
            prev: i as isize - 1,
            next: i as isize + 1,
        });
    }
    if syms.is_empty() {
        return;
    }
    let last = syms.len() - 1;
    syms[last].next = -1;

    let mut heap = BinaryHeap::new();
    let try_add = |heap: &mut BinaryHeap<Bigram>, syms: &[Sym], l: isize, r: isize| {
        if l < 0 || r < 0 {
            return;
        }
        let (ls, rs) = (&syms[l as usize], &syms[r as usize]);
        let piece = &bytes[ls.start..ls.start + ls.len + rs.len];
        if let Some(id) = v.token_id(piece) {
            heap.push(Bigram {
                score: v.scores[id as usize],
                left: l as usize,
                right: r as usize,
                size: piece.len(),
            });
        }
    };
    for i in 1..syms.len() {
        try_add(&mut heap, &syms, i as isize - 1, i as isize);
    }
    while let Some(bg) = heap.pop() {
        let (l, r) = (bg.left, bg.right);
        if syms[l].len == 0 || syms[r].len == 0 || syms[l].len + syms[r].len != bg.size {
            continue;
        }
        syms[l].len += syms[r].len;
        syms[r].len = 0;
        let rn = syms[r].next;
        syms[l].next = rn;
        if rn >= 0 {
            syms[rn as usize].prev = l as isize;
        }
        let lp = syms[l].prev;
        try_add(&mut heap, &syms, lp, l as isize);
        try_add(&mut heap, &syms, l as isize, rn);
    }
    let mut i = 0isize;
    while i >= 0 {
        let s = &syms[i as usize];
        let piece = &bytes[s.start..s.start + s.len];
        match v.token_id(piece) {
            Some(id) => out.push(id),
            None => out.extend(piece.iter().filter_map(|&b| byte_token(v, b))),
        }
        i = s.next;
    }
}
