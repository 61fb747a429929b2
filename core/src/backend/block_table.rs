//! Block tables of the paged KV cache as a backend keeps them: for every sequence slot, which
//! pool block holds each run of [`KV_BLOCK`] positions of the full-attention layers. The
//! host-side allocator that decides them is [`crate::kv_cache::SeqTable`]; this is the
//! backend's checked copy, shared by every backend so they validate tables the same way.

use super::{BackendError, KvCacheSpec, KvLayerSpec, Result};

/// Positions per block. 64 is the CPU attention's key block (keys are converted and scored 64
/// at a time, so a key block never straddles two pool blocks), wastes at most 63 positions per
/// sequence, and keeps a 4096-token table at 64 entries, cheap to send with a step.
pub const KV_BLOCK: usize = 64;

/// A table entry with no block behind it.
pub const NO_BLOCK: u32 = u32::MAX;

/// Every sequence slot's table, `[n_seq][per_seq]`.
#[derive(Clone, Debug)]
pub struct BlockTables {
    per_seq: usize,
    n_blocks: usize,
    ids: Vec<u32>,
}

impl BlockTables {
    /// Tables for `spec`: slot `s` starts mapped to blocks `s·per_seq..` while they exist in
    /// the pool (a cache sized as separate slots then needs no table at all).
    pub fn new(spec: &KvCacheSpec) -> Self {
        let per_seq = spec.blocks_per_seq();
        let n_blocks = spec.n_blocks();
        let ids = (0..spec.n_seq * per_seq)
            .map(|i| if i < n_blocks { i as u32 } else { NO_BLOCK })
            .collect();
        BlockTables {
            per_seq,
            n_blocks,
            ids,
        }
    }

    /// Entries per sequence.
    pub fn per_seq(&self) -> usize {
        self.per_seq
    }

    /// Blocks in the pool.
    pub fn n_blocks(&self) -> usize {
        self.n_blocks
    }

    /// All tables, `[n_seq][per_seq]` (what a GPU backend uploads).
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Replaces `seq`'s table with `table` (shorter ones are padded with [`NO_BLOCK`]). Every
    /// block must exist, none may repeat within the table, and mapped entries come first (so a
    /// mapped block implies every earlier one is).
    pub fn set(&mut self, seq: u32, table: &[u32]) -> Result<()> {
        let n_seq = self.ids.len().checked_div(self.per_seq).unwrap_or(0);
        let bad = |m: String| Err(BackendError::InvalidStep(m));
        if seq as usize >= n_seq {
            return bad(format!(
                "sequence slot {seq} does not exist (the cache has {n_seq})"
            ));
        }
        if table.len() > self.per_seq {
            return bad(format!(
                "a block table of {} entries is longer than the {} a sequence has",
                table.len(),
                self.per_seq
            ));
        }
        let mapped = table.iter().take_while(|&&b| b != NO_BLOCK).count();
        if table[mapped..].iter().any(|&b| b != NO_BLOCK) {
            return bad("a block table has a gap".into());
        }
        let mut seen = table[..mapped].to_vec();
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return bad("a block table names one block twice".into());
        }
        if let Some(&b) = seen.last().filter(|&&b| b as usize >= self.n_blocks) {
            return bad(format!(
                "block {b} is outside the pool of {} blocks",
                self.n_blocks
            ));
        }
        let row = &mut self.ids[seq as usize * self.per_seq..][..self.per_seq];
        row.fill(NO_BLOCK);
        row[..table.len()].copy_from_slice(table);
        Ok(())
    }

    /// Pool position (block · [`KV_BLOCK`] + offset) of `seq`'s position `pos`, if its block is
    /// mapped.
    pub fn slot(&self, seq: usize, pos: usize) -> Option<usize> {
        let i = pos / KV_BLOCK;
        if i >= self.per_seq {
            return None;
        }
        let b = *self.ids.get(seq * self.per_seq + i)?;
        (b != NO_BLOCK).then(|| b as usize * KV_BLOCK + pos % KV_BLOCK)
    }
}

/// One contiguous run of a prefix copy ([`copy_runs`]): `len` positions from storage position
/// `src` to storage position `dst` of one layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyRun {
    pub src: usize,
    pub dst: usize,
    pub len: usize,
}

/// Where a copy of sequence `src`'s positions `0..n` to sequence `dst` reads and writes in one
/// layer's storage, as runs of consecutive storage positions: pool blocks through the tables
/// for a full-attention layer (`ring: None`); for a sliding-window layer with a ring of `ring`
/// positions per sequence, the ring slots of the last `ring` positions (older ones are
/// overwritten and never attended). Every backend copies with these runs, so they agree on
/// what a copy means. Fails when a position is not mapped in either table; the caller checks
/// that both sequence slots exist.
pub fn copy_runs(
    tables: &BlockTables,
    ring: Option<usize>,
    src: u32,
    dst: u32,
    n: usize,
) -> Result<Vec<CopyRun>> {
    if src == dst {
        return Err(BackendError::InvalidStep(format!(
            "cannot copy sequence {src} onto itself"
        )));
    }
    let mut runs = Vec::new();
    match ring {
        Some(cap) => {
            let mut p = n.saturating_sub(cap);
            while p < n {
                let at = p % cap;
                let len = (cap - at).min(n - p);
                runs.push(CopyRun {
                    src: src as usize * cap + at,
                    dst: dst as usize * cap + at,
                    len,
                });
                p += len;
            }
        }
        None => {
            let mut p = 0;
            while p < n {
                let len = (KV_BLOCK - p % KV_BLOCK).min(n - p);
                let (Some(s), Some(d)) =
                    (tables.slot(src as usize, p), tables.slot(dst as usize, p))
                else {
                    return Err(BackendError::InvalidStep(format!(
                        "position {p} of sequence {src} or {dst} has no block to copy"
                    )));
                };
                runs.push(CopyRun {
                    src: s,
                    dst: d,
                    len,
                });
                p += len;
            }
        }
    }
    Ok(runs)
}

/// Every layer's [`copy_runs`] for copying sequence `src`'s positions `0..n` to `dst` in a
/// cache of `n_seq` slots with these layers, checked before anything is copied (so a bad
/// request copies nothing): what each backend's `copy_prefix` carries out.
pub fn copy_plan<'a>(
    layers: impl IntoIterator<Item = &'a KvLayerSpec>,
    n_seq: usize,
    tables: &BlockTables,
    src: u32,
    dst: u32,
    n: usize,
) -> Result<Vec<Vec<CopyRun>>> {
    if src as usize >= n_seq || dst as usize >= n_seq {
        return Err(BackendError::InvalidStep(format!(
            "sequence slot {} does not exist (the cache has {n_seq})",
            src.max(dst)
        )));
    }
    layers
        .into_iter()
        .map(|l| {
            let ring = l.window.map(|_| l.capacity);
            if ring.is_none() && n > l.capacity {
                return Err(BackendError::InvalidStep(format!(
                    "{n} positions do not fit a context of {}",
                    l.capacity
                )));
            }
            copy_runs(tables, ring, src, dst, n)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{KvDtype, KvLayerSpec};

    fn spec(pool: Option<usize>) -> KvCacheSpec {
        KvCacheSpec {
            layers: vec![KvLayerSpec {
                n_kv_head: 1,
                head_dim_k: 2,
                head_dim_v: 2,
                capacity: 100,
                window: None,
            }],
            n_seq: 3,
            dtype: KvDtype::F32,
            pool_blocks: pool,
        }
    }

    #[test]
    fn copy_runs_follow_blocks_and_wrap_rings() {
        let mut t = BlockTables::new(&spec(Some(6)));
        t.set(0, &[4, 1]).unwrap();
        t.set(1, &[0, 5]).unwrap();
        let run = |src, dst, len| CopyRun { src, dst, len };
        assert_eq!(
            copy_runs(&t, None, 0, 1, 70).unwrap(),
            vec![
                run(4 * KV_BLOCK, 0, KV_BLOCK),
                run(KV_BLOCK, 5 * KV_BLOCK, 6)
            ]
        );
        // Past the mapped blocks, or onto itself: refused.
        assert!(copy_runs(&t, None, 0, 1, 129).is_err());
        assert!(copy_runs(&t, None, 1, 1, 1).is_err());
        // A ring of 10: the last 10 positions of 23 (13..23) sit at 3..10 then 0..3.
        assert_eq!(
            copy_runs(&t, Some(10), 2, 0, 23).unwrap(),
            vec![run(23, 3, 7), run(20, 0, 3)]
        );
        assert_eq!(
            copy_runs(&t, Some(10), 0, 1, 4).unwrap(),
            vec![run(0, 10, 4)]
        );
    }

    #[test]
    fn tables_start_as_separate_slots_and_are_checked_when_set() {
        let mut t = BlockTables::new(&spec(None));
        assert_eq!((t.per_seq(), t.n_blocks()), (2, 6));
        assert_eq!(t.slot(1, 70), Some(3 * KV_BLOCK + 6));
        assert_eq!(t.slot(1, 128), None);
        t.set(1, &[5]).unwrap();
        assert_eq!(t.slot(1, 3), Some(5 * KV_BLOCK + 3));
        assert_eq!(t.slot(1, 64), None);
        assert!(t.set(1, &[NO_BLOCK, 2]).is_err());
        assert!(t.set(1, &[2, 2]).is_err());
        assert!(t.set(1, &[6]).is_err());
        assert!(t.set(3, &[0]).is_err());
        assert!(t.set(0, &[0, 1, 2]).is_err());
        let small = BlockTables::new(&spec(Some(3)));
        assert_eq!(small.slot(1, 0), Some(2 * KV_BLOCK));
        assert_eq!(small.slot(1, 64), None);
        assert_eq!(small.slot(2, 0), None);
    }
}
