//! A compact string → id table: every text lives in one byte buffer and an open-addressing
//! index maps hashes to ids. Building it for a 262k-token vocabulary costs no per-token
//! allocation, which keeps model load fast.

/// Texts by id plus a hash index from text to id.
#[derive(Clone, Debug, Default)]
pub(crate) struct TextTable {
    data: Vec<u8>,
    /// `starts[id]..starts[id + 1]` is the text of `id`.
    starts: Vec<u32>,
    /// Open-addressing slots holding `id + 1` (0 = empty). Length is a power of two.
    slots: Vec<u32>,
}

/// 64-bit FNV-1a with a final avalanche, good enough for short token texts.
pub(crate) fn hash_bytes(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

impl TextTable {
    pub fn with_capacity(n: usize, bytes: usize) -> Self {
        let mut t = TextTable {
            data: Vec::with_capacity(bytes),
            starts: Vec::with_capacity(n + 1),
            slots: vec![0; (n * 2).next_power_of_two().max(16)],
        };
        t.starts.push(0);
        t
    }

    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn text(&self, id: u32) -> &[u8] {
        let i = id as usize;
        &self.data[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    pub fn get(&self, key: &[u8]) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut i = hash_bytes(key) as usize & mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if self.text(s - 1) == key {
                return Some(s - 1);
            }
            i = (i + 1) & mask;
        }
    }

    /// Appends `key` as a new id. When the text is already present, the index points to the
    /// newer id (llama.cpp's `token_to_id[text] = id` keeps the last duplicate).
    pub fn push(&mut self, key: &[u8]) -> u32 {
        let id = self.len() as u32;
        self.data.extend_from_slice(key);
        self.starts.push(self.data.len() as u32);
        if (self.len()) * 2 > self.slots.len() {
            self.rehash(self.slots.len() * 2);
        } else {
            self.index(id);
        }
        id
    }

    /// The id of `key`, appending it first when absent.
    pub fn intern(&mut self, key: &[u8]) -> u32 {
        match self.get(key) {
            Some(id) => id,
            None => self.push(key),
        }
    }

    fn index(&mut self, id: u32) {
        let mask = self.slots.len() - 1;
        let key_hash = hash_bytes(self.text(id));
        let mut i = key_hash as usize & mask;
        loop {
            let s = self.slots[i];
            if s == 0 || self.text(s - 1) == self.text(id) {
                self.slots[i] = id + 1;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    fn rehash(&mut self, n_slots: usize) {
        self.slots = vec![0; n_slots];
        for id in 0..self.len() as u32 {
            self.index(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_duplicates_and_growth() {
        let mut t = TextTable::with_capacity(2, 4);
        for i in 0..1000u32 {
            assert_eq!(t.push(format!("w{i}").as_bytes()), i);
        }
        assert_eq!(t.get(b"w0"), Some(0));
        assert_eq!(t.get(b"w999"), Some(999));
        assert_eq!(t.get(b"nope"), None);
        let dup = t.push(b"w5");
        assert_eq!(t.get(b"w5"), Some(dup), "last duplicate wins");
        assert_eq!(t.text(5), b"w5");
        assert_eq!(t.intern(b"w7"), 7);
        assert_eq!(t.intern(b"new"), 1001);
    }
}
