//! Token ids back to bytes (llama.cpp's `token_to_piece`): control and unknown tokens render
//! only when asked for, user-defined tokens always render as their text, SentencePiece pieces
//! turn U+2581 back into spaces and `<0xXX>` into bytes, byte-level BPE pieces map each
//! stand-in character back to its byte.

use super::bpe::char_to_byte;
use super::vocab::{attr, Algo, GgufVocab};

/// The bytes token `id` stands for (empty for an id outside the vocabulary).
pub(crate) fn token_bytes(v: &GgufVocab, id: u32, special: bool) -> Vec<u8> {
    if (id as usize) >= v.n_vocab {
        return Vec::new();
    }
    let a = v.attrs[id as usize];
    let text = v.texts.text(id);
    if a & (attr::CONTROL | attr::UNKNOWN) != 0 {
        return if special { text.to_vec() } else { Vec::new() };
    }
    if a & attr::USER_DEFINED != 0 {
        return text.to_vec();
    }
    match &v.algo {
        Algo::Spm | Algo::Wpm => {
            if a & attr::NORMAL != 0 {
                let s = String::from_utf8_lossy(text);
                s.replace('\u{2581}', " ").into_bytes()
            } else if a & attr::BYTE != 0 {
                parse_byte_token(text).map(|b| vec![b]).unwrap_or_default()
            } else {
                Vec::new()
            }
        }
        Algo::Bpe { .. } => {
            if a & attr::NORMAL != 0 {
                let s = String::from_utf8_lossy(text);
                let mut out = Vec::with_capacity(s.len());
                for c in s.chars() {
                    match char_to_byte(c) {
                        Some(b) => out.push(b),
                        // Not a stand-in: keep the character itself.
                        None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                    }
                }
                out
            } else {
                Vec::new()
            }
        }
    }
}

/// `<0xAB>` → 0xAB.
fn parse_byte_token(text: &[u8]) -> Option<u8> {
    let s = std::str::from_utf8(text).ok()?;
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}
