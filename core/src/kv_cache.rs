//! Host-side bookkeeping of the key/value cache: which sequence slots are in use, how many
//! positions each holds, and which pool blocks hold them. The cached tensors themselves live
//! in the backend ([`crate::backend::Backend::create_kv_cache`]): full-attention layers in a
//! pool of [`KV_BLOCK`]-position blocks shared by every sequence, reached through the block
//! tables kept here; sliding-window layers keep only their window, per slot (see
//! [`crate::model::Model::kv_layers`]).

use crate::backend::{KvDtype, KV_BLOCK};

/// How a cache is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvCacheConfig {
    /// Positions per sequence (`--ctx`).
    pub n_ctx: usize,
    /// Sequence slots (concurrent sequences).
    pub n_seq: usize,
    /// Element type of cached keys and values.
    pub dtype: KvDtype,
    /// Positions in the shared block pool (rounded up to whole blocks, and to at least one
    /// full context); `None`: a full context for every sequence slot.
    pub pool_tokens: Option<usize>,
}

impl Default for KvCacheConfig {
    fn default() -> Self {
        KvCacheConfig {
            n_ctx: 4096,
            n_seq: 1,
            dtype: KvDtype::F16,
            pool_tokens: None,
        }
    }
}

impl KvCacheConfig {
    /// Blocks in the pool: what `pool_tokens` asks, never less than one sequence at full
    /// context (so a lone sequence can always reach its context limit).
    pub fn pool_blocks(&self) -> usize {
        let one = self.n_ctx.div_ceil(KV_BLOCK);
        match self.pool_tokens {
            Some(t) => t.div_ceil(KV_BLOCK).max(one),
            None => one * self.n_seq,
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
    #[error("the KV cache pool is full: {needed} more blocks of {KV_BLOCK} positions are needed but {free} of {total} are free; use a larger --kv-size or fewer concurrent sequences")]
    PoolFull {
        needed: usize,
        free: usize,
        total: usize,
    },
}

/// Lengths and occupancy of the sequence slots, and the block allocator: each sequence's table
/// (logical block -> pool block) grows as the sequence does and gives blocks back when it is
/// truncated or released.
#[derive(Clone, Debug)]
pub struct SeqTable {
    n_ctx: usize,
    lens: Vec<usize>,
    in_use: Vec<bool>,
    tables: Vec<Vec<u32>>,
    /// Free pool blocks, taken from the end.
    free: Vec<u32>,
    n_blocks: usize,
    /// Sequences whose table changed since [`SeqTable::take_changed`] last ran.
    changed: Vec<bool>,
}

impl SeqTable {
    pub fn new(cfg: &KvCacheConfig) -> Self {
        let n_blocks = cfg.pool_blocks();
        SeqTable {
            n_ctx: cfg.n_ctx,
            lens: vec![0; cfg.n_seq],
            in_use: vec![false; cfg.n_seq],
            tables: vec![Vec::new(); cfg.n_seq],
            // Lowest ids on top, so a lone sequence gets blocks in order.
            free: (0..n_blocks as u32).rev().collect(),
            n_blocks,
            // Every backend table starts at its own default and must be told it is empty.
            changed: vec![true; cfg.n_seq],
        }
    }

    /// Blocks in the pool.
    pub fn n_blocks(&self) -> usize {
        self.n_blocks
    }

    /// Blocks no sequence holds.
    pub fn free_blocks(&self) -> usize {
        self.free.len()
    }

    /// Blocks `seq` holds.
    pub fn held_blocks(&self, seq: u32) -> Result<usize, KvError> {
        self.check(seq)?;
        Ok(self.tables[seq as usize].len())
    }

    /// New blocks `n` more positions of `seq` would take.
    pub fn blocks_needed(&self, seq: u32, n: usize) -> Result<usize, KvError> {
        self.check(seq)?;
        let want = (self.lens[seq as usize] + n).div_ceil(KV_BLOCK);
        Ok(want.saturating_sub(self.tables[seq as usize].len()))
    }

    /// `seq`'s block table.
    pub fn table(&self, seq: u32) -> Result<&[u32], KvError> {
        self.check(seq)?;
        Ok(&self.tables[seq as usize])
    }

    /// The sequences whose tables changed since the last call (to send to the backend).
    pub fn take_changed(&mut self) -> Vec<u32> {
        let out = (0..self.changed.len() as u32)
            .filter(|&s| self.changed[s as usize])
            .collect();
        self.changed.fill(false);
        out
    }

    /// Marks every table as changed (after a backend lost track of them).
    pub fn mark_all_changed(&mut self) {
        self.changed.fill(true);
    }

    /// Fails with [`KvError::PoolFull`] unless `needed` blocks are free.
    pub fn check_blocks(&self, needed: usize) -> Result<(), KvError> {
        if needed > self.free.len() {
            return Err(KvError::PoolFull {
                needed,
                free: self.free.len(),
                total: self.n_blocks,
            });
        }
        Ok(())
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
        self.truncate(seq, 0)?;
        self.in_use[seq as usize] = false;
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
        let keep = l.div_ceil(KV_BLOCK);
        let t = &mut self.tables[seq as usize];
        if t.len() > keep {
            // Back on the stack last-first, so the next taker gets them in table order.
            self.free.extend(t.drain(keep..).rev());
            self.changed[seq as usize] = true;
        }
        Ok(())
    }

    /// Checks that `n` more positions fit the context, without taking them (the pool is
    /// checked by [`SeqTable::advance`] and [`SeqTable::check_blocks`]).
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

    /// Takes `n` more positions (and the blocks they need) and returns the first.
    pub fn advance(&mut self, seq: u32, n: usize) -> Result<usize, KvError> {
        let start = self.check_room(seq, n)?;
        let needed = self.blocks_needed(seq, n)?;
        self.check_blocks(needed)?;
        let t = &mut self.tables[seq as usize];
        for _ in 0..needed {
            t.extend(self.free.pop());
        }
        if needed > 0 {
            self.changed[seq as usize] = true;
        }
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
            pool_tokens: None,
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

    #[test]
    fn blocks_are_taken_as_sequences_grow_and_given_back() {
        let mut t = SeqTable::new(&KvCacheConfig {
            n_ctx: 2 * KV_BLOCK,
            n_seq: 3,
            dtype: KvDtype::F16,
            pool_tokens: Some(3 * KV_BLOCK),
        });
        assert_eq!((t.n_blocks(), t.free_blocks()), (3, 3));
        let (a, b, c) = (
            t.acquire().unwrap(),
            t.acquire().unwrap(),
            t.acquire().unwrap(),
        );
        t.take_changed();
        t.advance(a, 1).unwrap();
        t.advance(b, KV_BLOCK + 1).unwrap();
        assert_eq!(t.table(a).unwrap(), &[0]);
        assert_eq!(t.table(b).unwrap(), &[1, 2]);
        assert_eq!(t.take_changed(), vec![a, b]);
        // Within its block a sequence takes nothing more.
        assert_eq!(t.blocks_needed(a, KV_BLOCK - 1).unwrap(), 0);
        t.advance(a, KV_BLOCK - 1).unwrap();
        assert!(t.take_changed().is_empty());
        assert_eq!(
            t.advance(c, 1),
            Err(KvError::PoolFull {
                needed: 1,
                free: 0,
                total: 3
            })
        );
        assert_eq!(t.len(c).unwrap(), 0);
        t.truncate(b, KV_BLOCK).unwrap();
        assert_eq!(t.table(b).unwrap(), &[1]);
        t.advance(c, 1).unwrap();
        assert_eq!(t.table(c).unwrap(), &[2]);
        t.release(a).unwrap();
        assert_eq!(t.free_blocks(), 1);
        assert_eq!(t.take_changed(), vec![a, b, c]);
    }

    #[test]
    fn the_pool_holds_at_least_one_full_context() {
        let cfg = |pool| KvCacheConfig {
            n_ctx: 1000,
            n_seq: 8,
            dtype: KvDtype::F16,
            pool_tokens: pool,
        };
        assert_eq!(cfg(None).pool_blocks(), 8 * 16);
        assert_eq!(cfg(Some(10)).pool_blocks(), 16);
        assert_eq!(cfg(Some(5000)).pool_blocks(), 79);
    }
}
