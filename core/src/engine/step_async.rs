//! The step split in two — plan (positions, graph) and finish (logits, or giving positions
//! back on failure) — so a step can run synchronously ([`Engine::step`]) or with its GPU
//! readback awaited ([`Engine::step_async`], the browser's path: WebGPU cannot block).

use super::{Engine, EngineError, Row};
use crate::backend::{Graph, Readback, StepBatch};

/// A step ready to execute: its graph and per-row inputs.
pub(super) struct StepPlan {
    pub graph: Graph,
    tokens: Vec<u32>,
    positions: Vec<u32>,
    seqs: Vec<u32>,
    /// Rows per sequence (to give positions back on failure).
    need: Vec<(u32, usize)>,
}

impl StepPlan {
    pub fn batch(&self) -> StepBatch<'_> {
        StepBatch {
            tokens: &self.tokens,
            positions: &self.positions,
            seqs: &self.seqs,
        }
    }
}

impl Engine {
    /// Checks the rows, takes their positions and records the step's graph.
    pub(super) fn plan_step(&mut self, rows: &[Row]) -> Result<StepPlan, EngineError> {
        self.plan_step_with(rows, |_| {})
    }

    /// [`plan_step`](Self::plan_step) with `prepare` setting the graph's per-step inputs
    /// (given embedding rows, bidirectional ranges) before the model records into it.
    pub(super) fn plan_step_with(
        &mut self,
        rows: &[Row],
        prepare: impl FnOnce(&mut Graph),
    ) -> Result<StepPlan, EngineError> {
        if rows.is_empty() || rows.len() > self.cfg.max_batch {
            return Err(EngineError::Invalid(format!(
                "a step takes 1 to {} rows, got {}",
                self.cfg.max_batch,
                rows.len()
            )));
        }
        // Check room for every sequence before taking any position.
        let mut need: Vec<(u32, usize)> = Vec::new();
        for r in rows {
            match need.iter_mut().find(|(s, _)| *s == r.seq) {
                Some((_, n)) => *n += 1,
                None => need.push((r.seq, 1)),
            }
        }
        let mut blocks = 0;
        for &(s, n) in &need {
            self.seqs.check_room(s, n)?;
            blocks += self.seqs.blocks_needed(s, n)?;
        }
        self.seqs.check_blocks(blocks)?;
        let mut positions = Vec::with_capacity(rows.len());
        for r in rows {
            positions.push(self.seqs.advance(r.seq, 1)? as u32);
        }
        if let Err(e) = self.send_tables() {
            for &(s, n) in &need {
                let len = self.seqs.len(s)?;
                self.seqs.truncate(s, len - n)?;
            }
            // The backend may hold part of the update: send every table again next time.
            self.seqs.mark_all_changed();
            return Err(e);
        }
        let out_rows: Vec<u32> = (0..rows.len() as u32)
            .filter(|&i| rows[i as usize].logits)
            .collect();
        let mut graph = Graph::new(rows.len());
        prepare(&mut graph);
        // Rows of a sequence that holds an image continue from the image's rotary positions.
        let seqs: Vec<u32> = rows.iter().map(|r| r.seq).collect();
        if graph.rope_positions.is_none()
            && self.model.rope_sections().is_some()
            && seqs.iter().any(|&s| self.rope_shifts.has(s))
        {
            graph.rope_positions = Some(self.rope_shifts.text_rows(&seqs, &positions).into());
        }
        let logits = self.model.build(&mut graph, self.kv, &out_rows);
        graph.output(logits);
        Ok(StepPlan {
            graph,
            tokens: rows.iter().map(|r| r.token).collect(),
            positions,
            seqs: rows.iter().map(|r| r.seq).collect(),
            need,
        })
    }

    /// Tells the backend every block table that changed since the last step.
    pub(super) fn send_tables(&mut self) -> Result<(), EngineError> {
        for s in self.seqs.take_changed() {
            self.backend
                .set_block_table(self.kv, s, self.seqs.table(s)?)?;
        }
        Ok(())
    }

    /// Turns the backend's result into per-row logits; on failure gives the positions back so
    /// the sequences stay consistent.
    pub(super) fn finish_step(
        &mut self,
        plan: &StepPlan,
        result: crate::backend::Result<Vec<Readback>>,
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        let out = match result {
            Ok(o) => o,
            Err(e) => {
                for &(s, n) in &plan.need {
                    let len = self.seqs.len(s)?;
                    self.seqs.truncate(s, len - n)?;
                }
                return Err(e.into());
            }
        };
        match out.into_iter().next() {
            // One row (every decode step of a single stream): hand the buffer over rather
            // than copy a vocabulary's worth of floats per token.
            Some(Readback::F32 {
                rows: 1,
                cols,
                mut data,
            }) if data.len() >= cols => {
                data.truncate(cols);
                Ok(vec![data])
            }
            Some(Readback::F32 { rows, cols, data }) => Ok((0..rows)
                .map(|r| data[r * cols..(r + 1) * cols].to_vec())
                .collect()),
            _ => Err(EngineError::Invalid(
                "the backend returned no logits".into(),
            )),
        }
    }

    /// [`step`](Self::step), awaiting the backend's readback instead of blocking on it.
    pub async fn step_async(&mut self, rows: &[Row]) -> Result<Vec<Vec<f32>>, EngineError> {
        let plan = self.plan_step(rows)?;
        let result = match self.backend.submit(&plan.graph, &plan.batch()) {
            Ok(p) => p.wait().await,
            Err(e) => Err(e),
        };
        self.finish_step(&plan, result)
    }

    /// [`prefill`](Self::prefill), awaiting each chunk.
    pub async fn prefill_async(
        &mut self,
        seq: u32,
        tokens: &[u32],
    ) -> Result<Vec<f32>, EngineError> {
        let mut last = Vec::new();
        for rows in self.prefill_batches(seq, tokens)? {
            if let Some(l) = self.step_async(&rows).await?.pop() {
                last = l;
            }
        }
        Ok(last)
    }

    /// [`decode`](Self::decode), awaiting the readback.
    pub async fn decode_async(&mut self, seq: u32, token: u32) -> Result<Vec<f32>, EngineError> {
        let mut out = self
            .step_async(&[Row {
                seq,
                token,
                logits: true,
            }])
            .await?;
        out.pop()
            .ok_or_else(|| EngineError::Invalid("the backend returned no logits".into()))
    }

    /// The backend's name (`cpu`, `wgpu`).
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }
}
