//! Incremental decoding for streamed generation: pieces are buffered until they form whole
//! UTF-8 characters, so a character split across byte tokens is never emitted in halves.

use super::Tokenizer;

/// Turns ids into text one at a time, holding back incomplete UTF-8 sequences.
#[derive(Clone, Debug, Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
    special: bool,
}

impl StreamDecoder {
    /// A decoder; `special` renders control tokens as their text.
    pub fn new(special: bool) -> Self {
        StreamDecoder {
            pending: Vec::new(),
            special,
        }
    }

    /// Adds one token and returns the text that became complete (possibly empty).
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> String {
        let piece = tok.token_bytes(id, self.special);
        self.push_bytes(&piece)
    }

    /// Adds raw bytes and returns the text that became complete (possibly empty). Bytes that
    /// can never start a valid character are emitted as U+FFFD right away.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    // SAFETY-free: from_utf8 validated this prefix.
                    out.push_str(std::str::from_utf8(&self.pending[..good]).unwrap_or_default());
                    match e.error_len() {
                        // An invalid sequence: replace it and keep going.
                        Some(n) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..good + n);
                        }
                        // An incomplete character at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..good);
                            return out;
                        }
                    }
                }
            }
        }
    }

    /// Whether bytes of an unfinished character are held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Flushes what is left (an unfinished character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_back_partial_characters() {
        let mut d = StreamDecoder::new(false);
        let rocket = "🚀".as_bytes();
        assert_eq!(d.push_bytes(b"go "), "go ");
        assert_eq!(d.push_bytes(&rocket[..1]), "");
        assert_eq!(d.push_bytes(&rocket[1..3]), "");
        assert!(d.has_pending());
        assert_eq!(d.push_bytes(&rocket[3..]), "🚀");
        assert_eq!(d.push_bytes(&[0xFF, b'a']), "\u{FFFD}a");
        assert_eq!(d.push_bytes(&[0xE6, 0x9D]), "");
        assert_eq!(d.finish(), "\u{FFFD}");
        assert_eq!(d.finish(), "");
    }
}
