//! Byte-level BPE (`tokenizer.ggml.model = gpt2`): each pre-tokenized word becomes one symbol
//! per byte (GPT-2's byte → printable character map), then the lowest-ranked adjacent pair is
//! merged until no ranked pair is left (ties: leftmost first), as llama.cpp does.
//!
//! Every string that occurs in a merge is interned at load (texts beyond the vocabulary get
//! ids past its end), so merging compares integer ids, never strings.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::table::TextTable;
use super::TokenizerError;
use crate::gguf::Value;

/// GPT-2's printable stand-in for each byte.
pub(crate) fn byte_to_char(b: u8) -> char {
    let printable = matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable {
        return b as char;
    }
    // Non-printable bytes take 256, 257, ... in byte order.
    let n = (0..b)
        .filter(|&x| !matches!(x, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF))
        .count() as u32;
    char::from_u32(256 + n).unwrap_or('?')
}

/// The byte a GPT-2 stand-in character represents.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    static TABLE: std::sync::OnceLock<HashMap<char, u8>> = std::sync::OnceLock::new();
    TABLE
        .get_or_init(|| (0..=255u8).map(|b| (byte_to_char(b), b)).collect())
        .get(&c)
        .copied()
}

/// Ranked merges keyed by the interned ids of both sides.
#[derive(Clone, Debug)]
pub(crate) struct BpeMerges {
    /// (left id, right id) → (rank, id of the merged text).
    pairs: HashMap<u64, (u32, u32), IdHash>,
    /// Interned id of each byte's stand-in character.
    byte_ids: [u32; 256],
}

/// A multiplicative hasher for u64 keys that are already well spread.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IdHash;
#[derive(Default)]
pub(crate) struct IdHasher(u64);
impl std::hash::BuildHasher for IdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}
impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7cc1_b727_220a_95);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ (v >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        self.0 ^= self.0 >> 32;
    }
}

fn key(a: u32, b: u32) -> u64 {
    ((a as u64) << 32) | b as u64
}

impl BpeMerges {
    pub fn build(texts: &mut TextTable, merges: &[Value]) -> Result<Self, TokenizerError> {
        let mut pairs = HashMap::with_capacity_and_hasher(merges.len(), IdHash);
        let mut buf = Vec::new();
        for (rank, v) in merges.iter().enumerate() {
            let s = v.as_str().ok_or_else(|| TokenizerError::BadMetadata {
                key: "tokenizer.ggml.merges".into(),
                msg: format!("entry {rank} is a {}", v.type_name()),
            })?;
            // Split at the first space after the first byte (a side may itself be a space).
            let found = s.as_bytes().iter().skip(1).position(|&b| b == b' ');
            let Some(pos) = found.map(|p| p + 1) else {
                continue;
            };
            let (a, b) = (&s[..pos], &s[pos + 1..]);
            let ia = texts.intern(a.as_bytes());
            let ib = texts.intern(b.as_bytes());
            buf.clear();
            buf.extend_from_slice(a.as_bytes());
            buf.extend_from_slice(b.as_bytes());
            let ic = texts.intern(&buf);
            // The first occurrence of a pair keeps its rank.
            pairs.entry(key(ia, ib)).or_insert((rank as u32, ic));
        }
        let mut byte_ids = [0u32; 256];
        let mut tmp = [0u8; 4];
        for (b, slot) in byte_ids.iter_mut().enumerate() {
            *slot = texts.intern(byte_to_char(b as u8).encode_utf8(&mut tmp).as_bytes());
        }
        Ok(BpeMerges { pairs, byte_ids })
    }

    /// Appends the ids of one pre-tokenized word (raw bytes) to `out`.
    pub fn encode_word(
        &self,
        texts: &TextTable,
        n_vocab: usize,
        word: &[u8],
        ignore_merges: bool,
        out: &mut Vec<u32>,
    ) {
        if word.is_empty() {
            return;
        }
        if ignore_merges {
            let encoded: String = word.iter().map(|&b| byte_to_char(b)).collect();
            if let Some(id) = texts.get(encoded.as_bytes()).filter(|&i| (i as usize) < n_vocab) {
                out.push(id);
                return;
            }
        }
        struct Sym {
            id: u32,
            prev: i32,
            next: i32,
            live: bool,
        }
        let n = word.len();
        let mut syms: Vec<Sym> = word
            .iter()
            .enumerate()
            .map(|(i, &b)| Sym {
                id: self.byte_ids[b as usize],
                prev: i as i32 - 1,
                next: if i + 1 == n { -1 } else { i as i32 + 1 },
                live: true,
            })
            .collect();
        // Min-heap on (rank, left position); the ids detect stale entries.
        let mut heap: BinaryHeap<Reverse<(u32, u32, u32, u32, u32)>> = BinaryHeap::new();
        let push = |heap: &mut BinaryHeap<_>, syms: &[Sym], l: i32, r: i32| {
            if l < 0 || r < 0 {
                return;
            }
            let (a, b) = (syms[l as usize].id, syms[r as usize].id);
            if let Some(&(rank, _)) = self.pairs.get(&key(a, b)) {
                heap.push(Reverse((rank, l as u32, r as u32, a, b)));
            }
        };
        for i in 1..n {
            push(&mut heap, &syms, i as i32 - 1, i as i32);
        }
        while let Some(Reverse((_, l, r, a, b))) = heap.pop() {
            let (l, r) = (l as usize, r as usize);
            if !syms[l].live || !syms[r].live || syms[l].id != a || syms[r].id != b {
                continue;
            }
            let merged = self.pairs[&key(a, b)].1;
            syms[l].id = merged;
            syms[r].live = false;
            let rn = syms[r].next;
            syms[l].next = rn;
            if rn >= 0 {
                syms[rn as usize].prev = l as i32;
            }
            let lp = syms[l].prev;
            push(&mut heap, &syms, lp, l as i32);
            push(&mut heap, &syms, l as i32, rn);
        }
        let mut i = 0i32;
        while i >= 0 {
            let s = &syms[i as usize];
            if (s.id as usize) < n_vocab {
                out.push(s.id);
            } else {
                // Not a token: llama.cpp tries each byte of the text as a one-byte token.
                for &b in texts.text(s.id) {
                    if let Some(id) = texts.get(&[b]).filter(|&i| (i as usize) < n_vocab) {
                        out.push(id);
                    }
                }
            }
            i = s.next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_roundtrip() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
        }
    }
}
