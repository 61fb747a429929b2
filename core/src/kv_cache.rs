//! Host-side bookkeeping of the key/value cache: which sequence slots are in use and how many
//! positions each holds. The cached tensors themselves live in the backend
//! ([`crate::backend::Backend::create_kv_cache`]); sliding-window layers keep only their window
//! there (see [`crate::model::Model::kv_layers`]).

use crate::backend::KvDtype;

/// How a cache is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvCacheConfig {
    /// Positions per sequence (`--ctx`).
    pub n_ctx: usize,
    /// Sequence slots (concurrent sequences).
    pub n_seq: usize,
    /// Element type of cached keys and values.
    pub dtype: KvDtype,
}

impl Default for KvCacheConfig {
    fn default() -> Self {
        KvCacheConfig {
            n_ctx: 4096,
            n_seq: 1,
            dtype: KvDtype::F16,
        }
    }
}

/// Why a cache operation was refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum KvError {
    #[error("{needed} tokens do not fit the context of {n_ctx} (sequence {seq} already holds {held}); use a larger --ctx or a shorter prompt")]
    ContextFull {
        seq: u32,
        held: usize,
        needed: usize,
        n_ctx: usize,
    },
    #[error("sequence slot {0} does not exist")]
    NoSuchSequence(u32),
    #[error("all {0} sequence slots are in use")]
    NoFreeSlot(usize),
}

/// Lengths and occupancy of the sequence slots.
#[derive(Clone, Debug)]
pub struct SeqTable {
    n_ctx: usize,
    lens: Vec<usize>,
    in_use: Vec<bool>,
}

impl SeqTable {
    pub fn new(cfg: &KvCacheConfig) -> Self {
        SeqTable {
            n_ctx: cfg.n_ctx,
            lens: vec![0; cfg.n_seq],
            in_use: vec![false; cfg.n_seq],
        }
    }

    /// Context length per sequence.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Takes a free slot (empty).
    pub fn acquire(&mut self) -> Result<u32, KvError> {
        let i = self
            .in_use
            .iter()
            .position(|u| !u)
            .ok_or(KvError::NoFreeSlot(self.in_use.len()))?;
        self.in_use[i] = true;
        self.lens[i] = 0;
        Ok(i as u32)
    }

    /// Returns a slot; its cached positions are forgotten.
    pub fn release(&mut self, seq: u32) -> Result<(), KvError> {
        self.check(seq)?;
        self.in_use[seq as usize] = false;
        self.lens[seq as usize] = 0;
        Ok(())
    }

    /// Positions held by a sequence.
    pub fn len(&self, seq: u32) -> Result<usize, KvError> {
        self.check(seq)?;
        Ok(self.lens[seq as usize])
    }

    /// Forgets positions from `len` on (e.g. to restart a sequence with `len = 0`).
    pub fn truncate(&mut self, seq: u32, len: usize) -> Result<(), KvError> {
        self.check(seq)?;
        let l = &mut self.lens[seq as usize];
        *l = (*l).min(len);
        Ok(())
    }

    /// Checks that `n` more positions fit, without taking them.
    pub fn check_room(&self, seq: u32, n: usize) -> Result<usize, KvError> {
        self.check(seq)?;
        let held = self.lens[seq as usize];
        if held + n > self.n_ctx {
            return Err(KvError::ContextFull {
                seq,
                held,
                needed: n,
                n_ctx: self.n_ctx,
            });
        }
        Ok(held)
    }

    /// Takes `n` more positions and returns the first.
    pub fn advance(&mut self, seq: u32, n: usize) -> Result<usize, KvError> {
        let start = self.check_room(seq, n)?;
        self.lens[seq as usize] += n;
        Ok(start)
    }

    fn check(&self, seq: u32) -> Result<(), KvError> {
        if (seq as usize) < self.lens.len() {
            Ok(())
        } else {
            Err(KvError::NoSuchSequence(seq))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_handed_out_until_the_context_is_full() {
        let mut t = SeqTable::new(&KvCacheConfig {
            n_ctx: 10,
            n_seq: 2,
            dtype: KvDtype::F16,
        });
        let a = t.acquire().unwrap();
        let b = t.acquire().unwrap();
        assert_ne!(a, b);
        assert_eq!(t.acquire(), Err(KvError::NoFreeSlot(2)));
        assert_eq!(t.advance(a, 6).unwrap(), 0);
        assert_eq!(t.advance(a, 4).unwrap(), 6);
        assert!(matches!(
            t.advance(a, 1),
            Err(KvError::ContextFull { held: 10, .. })
        ));
        t.truncate(a, 3).unwrap();
        assert_eq!(t.advance(a, 1).unwrap(), 3);
        assert_eq!(t.len(b).unwrap(), 0);
        t.release(a).unwrap();
        assert_eq!(t.acquire().unwrap(), a);
        assert_eq!(t.len(9), Err(KvError::NoSuchSequence(9)));
    }
}
