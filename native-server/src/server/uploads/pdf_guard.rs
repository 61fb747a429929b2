//! Checks on a PDF's raw bytes before any PDF parser sees them, so that hostile files are
//! refused cheaply instead of exhausting the parser: objects nested deeper than any real
//! document (a recursive parser would overflow its stack), streams whose declared `/Length`
//! exceeds the file (a parser may allocate what is declared), and compressed streams that
//! inflate beyond a budget (a "zip bomb" would exhaust memory when the parser decompresses it).
//!
//! The scan is a tokenizer, not a parser: it skips comments, literal and hex strings and stream
//! data, so brackets inside them do not count as nesting.

use std::io::Read;

/// Why a PDF was refused before parsing.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Malformed or hostile structure (422).
    Structure(String),
    /// Decompresses beyond the budget (413).
    TooLarge(String),
}

/// Deepest nesting of arrays and dictionaries accepted (real documents stay under ~10).
pub const MAX_DEPTH: usize = 64;

/// Scans `b`; `max_inflated`: the most bytes all zlib streams together may inflate to.
pub fn check(b: &[u8], max_inflated: u64) -> Result<(), Refusal> {
    let mut depth = 0usize;
    let mut inflated = 0u64;
    let mut i = 0usize;
    let deeper = |depth: &mut usize| {
        *depth += 1;
        if *depth > MAX_DEPTH {
            Err(Refusal::Structure(format!(
                "the PDF nests arrays or dictionaries more than {MAX_DEPTH} deep; no real \
                 document does, so it is refused as malformed"
            )))
        } else {
            Ok(())
        }
    };
    while i < b.len() {
        match b[i] {
            b'%' => i = skip_line(b, i),
            b'(' => i = skip_literal(b, i),
            b'<' if b.get(i + 1) == Some(&b'<') => {
                deeper(&mut depth)?;
                i += 2;
            }
            b'<' => i = find(b, i, b">").map_or(b.len(), |p| p + 1),
            b'>' if b.get(i + 1) == Some(&b'>') => {
                depth = depth.saturating_sub(1);
                i += 2;
            }
            b'[' => {
                deeper(&mut depth)?;
                i += 1;
            }
            b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'/' if b[i..].starts_with(b"/Length") => {
                check_length(b, i + 7)?;
                i += 7;
            }
            b's' if b[i..].starts_with(b"stream") && !word_char(b, i.wrapping_sub(1)) => {
                let mut start = i + 6;
                if b.get(start) == Some(&b'\r') {
                    start += 1;
                }
                if b.get(start) != Some(&b'\n') {
                    i += 6;
                    continue;
                }
                start += 1;
                let end = find(b, start, b"endstream").ok_or_else(|| {
                    Refusal::Structure(
                        "a stream has no `endstream`: the PDF is truncated or corrupt".into(),
                    )
                })?;
                inflated +=
                    inflated_size(&b[start..end], max_inflated - inflated.min(max_inflated));
                if inflated > max_inflated {
                    return Err(Refusal::TooLarge(format!(
                        "the PDF's compressed streams expand to more than {} MiB",
                        max_inflated >> 20
                    )));
                }
                i = end + 9;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

fn word_char(b: &[u8], i: usize) -> bool {
    b.get(i).is_some_and(|c| c.is_ascii_alphanumeric())
}

fn skip_line(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|&c| c == b'\n' || c == b'\r')
        .map_or(b.len(), |p| i + p + 1)
}

/// Past a literal string `( ... )`, whose parentheses nest and may be escaped.
fn skip_literal(b: &[u8], mut i: usize) -> usize {
    let mut open = 0usize;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'(' => open += 1,
            b')' => {
                open -= 1;
                if open == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

/// A direct `/Length N` larger than the whole file cannot be honest.
fn check_length(b: &[u8], mut i: usize) -> Result<(), Refusal> {
    while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    let digits: Vec<u8> = b[i.min(b.len())..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .copied()
        .collect();
    if digits.is_empty() {
        return Ok(());
    }
    let n: u128 = std::str::from_utf8(&digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(u128::MAX);
    // `/Length 12 0 R` is a reference, not a length.
    let mut j = i + digits.len();
    let skip_ws = |j: &mut usize| {
        while b.get(*j).is_some_and(|c| c.is_ascii_whitespace()) {
            *j += 1;
        }
    };
    skip_ws(&mut j);
    let gen_start = j;
    while b.get(j).is_some_and(|c| c.is_ascii_digit()) {
        j += 1;
    }
    let had_gen = j > gen_start;
    skip_ws(&mut j);
    let is_ref = had_gen && b.get(j) == Some(&b'R');
    if !is_ref && n > b.len() as u128 {
        return Err(Refusal::Structure(format!(
            "a stream declares /Length {n}, more than the whole file ({} bytes): the PDF is \
             corrupt",
            b.len()
        )));
    }
    Ok(())
}

/// How many bytes `data` inflates to as a zlib stream, counting at most `budget + 1` (0 when it
/// is not zlib data: other filters are not expanded by text extraction).
fn inflated_size(data: &[u8], budget: u64) -> u64 {
    let mut z = flate2::read::ZlibDecoder::new(data).take(budget + 1);
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        match z.read(&mut buf) {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn deep_nesting_is_refused_but_strings_do_not_count() {
        let deep = format!("%PDF-1.4\n1 0 obj {} endobj", "[".repeat(1000));
        assert!(matches!(
            check(deep.as_bytes(), 1 << 20),
            Err(Refusal::Structure(_))
        ));
        let ok = format!("%PDF-1.4\n1 0 obj ({}) endobj", "[".repeat(1000));
        assert_eq!(check(ok.as_bytes(), 1 << 20), Ok(()));
    }

    #[test]
    fn lengths_and_bombs() {
        let lie = b"%PDF-1.4\n1 0 obj << /Length 99999999999 >> stream\nab\nendstream endobj";
        assert!(matches!(check(lie, 1 << 20), Err(Refusal::Structure(_))));
        let by_ref = b"%PDF-1.4\n1 0 obj << /Length 99999 0 R >> stream\nab\nendstream endobj";
        assert_eq!(check(by_ref, 1 << 20), Ok(()));
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&vec![b'a'; 4 << 20]).unwrap();
        let bomb = z.finish().unwrap();
        let mut pdf = b"%PDF-1.4\n1 0 obj << /Filter /FlateDecode >> stream\n".to_vec();
        pdf.extend_from_slice(&bomb);
        pdf.extend_from_slice(b"\nendstream endobj");
        assert!(matches!(check(&pdf, 1 << 20), Err(Refusal::TooLarge(_))));
        assert_eq!(check(&pdf, 8 << 20), Ok(()));
    }
}
