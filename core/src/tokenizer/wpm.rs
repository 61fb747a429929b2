//! WordPiece (`tokenizer.ggml.model = bert`), as llama.cpp runs it on GGUF vocabularies where
//! word-initial pieces carry a U+2581 prefix and continuation pieces carry none: normalise
//! (first code point of NFD, lowercase, drop controls), split on whitespace and around
//! punctuation and CJK ideographs, then match each word greedily longest-first; a word with
//! an unmatchable position becomes the unknown token.

use super::unicode::{category, is_whitespace, nfd_first, to_lower, Category};
use super::vocab::GgufVocab;

fn is_cjk(cp: u32) -> bool {
    matches!(cp,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B920..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// Normalised words of `text`.
fn words(text: &str) -> Vec<String> {
    let mut words = vec![String::new()];
    for c in text.chars().map(nfd_first) {
        if is_whitespace(c) {
            if !words.last().is_some_and(String::is_empty) {
                words.push(String::new());
            }
            continue;
        }
        let cat = category(c);
        if c == '\0' || c == '\u{FFFD}' || cat == Category::Control {
            continue;
        }
        let low = to_lower(c);
        let alone = cat == Category::Punctuation
            || ((c as u32) < 0x7F && cat == Category::Symbol)
            || is_cjk(c as u32);
        if alone {
            if !words.last().is_some_and(String::is_empty) {
                words.push(String::new());
            }
            if let Some(w) = words.last_mut() {
                w.push(low);
            }
            words.push(String::new());
        } else if let Some(w) = words.last_mut() {
            w.push(low);
        }
    }
    words.retain(|w| !w.is_empty());
    words
}

/// Appends the ids for `text` to `out`.
pub(crate) fn encode(v: &GgufVocab, text: &str, out: &mut Vec<u32>) {
    for word in words(text) {
        let w = format!("\u{2581}{word}");
        let b = w.as_bytes();
        let before = out.len();
        let mut i = 0;
        while i < b.len() {
            let hi = b.len().min(i + v.max_token_len + 1);
            match (i + 1..=hi).rev().find_map(|j| v.token_id(&b[i..j]).map(|id| (j, id))) {
                Some((j, id)) => {
                    out.push(id);
                    i = j;
                }
                None => {
                    out.truncate(before);
                    break;
                }
            }
        }
        if out.len() == before {
            out.extend(v.unk);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_and_splits() {
        assert_eq!(
            words("Héllo, WORLD!  東京\tx\u{0}"),
            ["hello", ",", "world", "!", "東", "京", "x"]
        );
        assert!(words("   ").is_empty());
    }
}
