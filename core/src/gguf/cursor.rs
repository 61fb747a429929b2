//! Bounds-checked little-endian reads over a prefix of a GGUF file.

use super::error::{GgufError, Result};

pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Length of the whole file; `bytes` may be only its first part.
    file_len: u64,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8], file_len: u64) -> Self {
        Cursor {
            bytes,
            pos: 0,
            file_len,
        }
    }

    pub fn pos(&self) -> u64 {
        self.pos as u64
    }

    /// Bytes left in the whole file after the cursor.
    pub fn remaining_in_file(&self) -> u64 {
        self.file_len.saturating_sub(self.pos as u64)
    }

    /// Fails unless `n` more bytes exist in the file (used before allocating for counts).
    pub fn require(&self, n: u64, what: &dyn Fn() -> String) -> Result<()> {
        if n > self.remaining_in_file() {
            return Err(GgufError::Truncated {
                what: what(),
                offset: self.pos as u64,
                needed: n,
                len: self.file_len,
            });
        }
        Ok(())
    }

    pub fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        self.require(n, what)?;
        let end = self.pos as u64 + n;
        if end > self.bytes.len() as u64 {
            return Err(GgufError::NeedMore {
                have: self.bytes.len() as u64,
                need: end,
            });
        }
        let s = &self.bytes[self.pos..end as usize];
        self.pos = end as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn u8(&mut self, what: &dyn Fn() -> String) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn u16(&mut self, what: &dyn Fn() -> String) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    pub fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A GGUF string: u64 length, then UTF-8 bytes.
    pub fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let len = self.u64(&|| format!("length of {}", what()))?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| {
            GgufError::Invalid(format!(
                "{} is not valid UTF-8 (at byte {})",
                what(),
                self.pos as u64 - len
            ))
        })
    }
}
