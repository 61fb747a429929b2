//! Code point classes the pre-tokenizers and WordPiece need, with llama.cpp's conventions:
//! one coarse category per code point, llama.cpp's whitespace set (Unicode `White_Space`
//! minus U+001C..U+001F), a simple lowercase map and "first code point of NFD".

use super::unicode_tables::{CATEGORY_RANGES, LOWERCASE, NFD_FIRST};

/// Coarse Unicode category of a code point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    /// Unassigned (`Cn`).
    Undefined,
    /// `N*`.
    Number,
    /// `L*`.
    Letter,
    /// `Z*`.
    Separator,
    /// `M*`.
    Mark,
    /// `P*`.
    Punctuation,
    /// `S*`.
    Symbol,
    /// `Cc`, `Cf`, `Co`, `Cs`.
    Control,
}

/// The category of `c`.
pub fn category(c: char) -> Category {
    let cp = c as u32;
    // Last range whose start is <= cp.
    let i = CATEGORY_RANGES.partition_point(|&(start, _)| start <= cp) - 1;
    match CATEGORY_RANGES[i].1 {
        1 => Category::Number,
        2 => Category::Letter,
        3 => Category::Separator,
        4 => Category::Mark,
        5 => Category::Punctuation,
        6 => Category::Symbol,
        7 => Category::Control,
        _ => Category::Undefined,
    }
}

/// Whether `c` is whitespace in llama.cpp's sense.
pub fn is_whitespace(c: char) -> bool {
    matches!(
        c as u32,
        0x09..=0x0D | 0x20 | 0x85 | 0xA0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029 | 0x202F
            | 0x205F | 0x3000
    )
}

/// `\p{L}`.
pub fn is_letter(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    category(c) == Category::Letter
}

/// `\p{N}`.
pub fn is_number(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    category(c) == Category::Number
}

/// `\p{P}`.
pub fn is_punctuation(c: char) -> bool {
    category(c) == Category::Punctuation
}

/// Simple (one code point) lowercase.
pub fn to_lower(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    let cp = c as u32;
    match LOWERCASE.binary_search_by_key(&cp, |&(k, _)| k) {
        Ok(i) => char::from_u32(LOWERCASE[i].1).unwrap_or(c),
        Err(_) => c,
    }
}

/// The first code point of `c`'s canonical decomposition (so `é` gives `e`).
pub fn nfd_first(c: char) -> char {
    if c.is_ascii() {
        return c;
    }
    let cp = c as u32;
    match NFD_FIRST.binary_search_by_key(&cp, |&(k, _)| k) {
        Ok(i) => char::from_u32(NFD_FIRST[i].1).unwrap_or(c),
        Err(_) => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert!(is_letter('a') && is_letter('é') && is_letter('東') && is_letter('п'));
        assert!(is_number('7') && is_number('٣') && is_number('½'));
        assert!(is_punctuation('!') && is_punctuation('—') && !is_punctuation('+'));
        assert_eq!(category('🚀'), Category::Symbol);
        assert_eq!(category('\u{0301}'), Category::Mark);
        assert_eq!(category('\u{0378}'), Category::Undefined);
        assert_eq!(category('\u{200d}'), Category::Control);
        assert!(is_whitespace('\u{3000}') && !is_whitespace('\u{1c}') && !is_whitespace('x'));
        assert_eq!(to_lower('Ä'), 'ä');
        assert_eq!(to_lower('Σ'), 'σ');
        assert_eq!(nfd_first('é'), 'e');
        assert_eq!(nfd_first('Å'), 'A');
    }
}
