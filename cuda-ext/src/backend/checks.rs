//! Host-side checks of a step's data (token ids, positions, sequence slots) against the model
//! and the caches. The launching code makes them as it goes; a replayed CUDA graph launches
//! nothing from the host, so [`CudaBackend::check_step`] makes them all before each step.

use weft_core::backend::{BackendError, Graph, Op, Result, RowIndex, StepBatch};

use super::ops::unmapped;
use super::CudaBackend;
use crate::launch as grid;

impl CudaBackend {
    /// Every check the step's nodes make of its data.
    pub(super) fn check_step(&self, graph: &Graph, batch: &StepBatch) -> Result<()> {
        for node in &graph.nodes {
            match &node.op {
                Op::Embed { table, .. }
                    if batch.tokens.iter().any(|&t| t as usize >= table.rows) =>
                {
                    return Err(BackendError::InvalidStep(
                        "a token id is outside the vocabulary".into(),
                    ));
                }
                Op::EmbedRows {
                    table,
                    by: RowIndex::Positions,
                } => {
                    if let Some(p) = batch.positions.iter().find(|&&p| p as usize >= table.rows) {
                        return Err(BackendError::InvalidStep(format!(
                            "position {p} is past the model's {} learned positions",
                            table.rows
                        )));
                    }
                }
                Op::KvStore { kv, layer, .. } => self.check_kv_rows(batch, kv.0, *layer)?,
                Op::Attention { kv, layer, .. } => {
                    self.check_attended(batch, kv.0, *layer)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The step's rows fit cache `kv`'s layer: slots in range, positions within capacity
    /// (layers without a window; windowed layers are ring buffers).
    pub(super) fn check_kv_rows(&self, batch: &StepBatch, kv: u32, layer: usize) -> Result<()> {
        let (cache, _) = self.cache(kv, layer)?;
        let spec = &cache.spec.layers[layer];
        for (&pos, &seq) in batch.positions.iter().zip(batch.seqs) {
            if seq as usize >= cache.spec.n_seq {
                return Err(BackendError::InvalidStep(format!(
                    "sequence slot {seq} is outside the cache"
                )));
            }
            if spec.window.is_none() && pos as usize >= spec.capacity {
                return Err(BackendError::ContextFull {
                    seq,
                    pos: pos as usize,
                    capacity: spec.capacity,
                });
            }
            if spec.window.is_none() && cache.tables.slot(seq as usize, pos as usize).is_none() {
                return Err(unmapped(layer, seq, pos));
            }
        }
        Ok(())
    }

    /// The most keys a row of the step attends in cache `kv`'s layer, checked to be held.
    pub(super) fn check_attended(&self, batch: &StepBatch, kv: u32, layer: usize) -> Result<u32> {
        let (cache, _) = self.cache(kv, layer)?;
        let spec = &cache.spec.layers[layer];
        let mut max_keys = 1;
        for (&pos, &seq) in batch.positions.iter().zip(batch.seqs) {
            let (_, n) = grid::attended(pos, spec.window, spec.capacity)
                .map_err(BackendError::InvalidStep)?;
            max_keys = max_keys.max(n);
            // Tables are mapped from their start: a mapped last position means every position
            // the row attends to is.
            if seq as usize >= cache.spec.n_seq
                || (spec.window.is_none()
                    && cache.tables.slot(seq as usize, pos as usize).is_none())
            {
                return Err(unmapped(layer, seq, pos));
            }
        }
        Ok(max_keys)
    }
}
