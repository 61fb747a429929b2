//! Capturing a step's launches into a CUDA graph and replaying it (when: crate::graphs).
//!
//! What a graph freezes and how each piece stays valid between replays:
//! - per-row inputs (token ids, positions, sequence slots): device buffers owned by the
//!   captured graph, overwritten before each replay;
//! - `SelectRows` row lists: part of the step graph, hence the same for every replay, uploaded
//!   once before the capture (a copy from pageable host memory cannot be captured);
//! - outputs (and top-k ids): allocated before the capture and kept, read back after each
//!   replay;
//! - intermediates and kernel scratch: allocated and freed inside the capture with the
//!   stream-ordered allocator, so they become the graph's own memory nodes;
//! - weights and KV caches: allocated at load, never moved while the backend lives.

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaSlice};
use weft_core::backend::{BackendError, Graph, Op, Result, StepBatch};

use super::{err, CudaBackend, Results, StepInputs};

/// A captured step with the buffers its launches point at.
pub(super) struct Captured {
    graph: CudaGraph,
    inputs: StepInputs,
    /// Read by the graph's `SelectRows` launches: kept alive as long as the graph.
    _tables: Vec<Option<CudaSlice<u32>>>,
    outputs: Results,
}

// SAFETY: CUDA graph objects are not internally synchronized, so they must not be used from
// two threads at once; a `Captured` lives inside the backend, whose every use takes `&mut self`
// (the backend is `Send`, not `Sync`), so calls on it never overlap even when the backend moves
// to another thread. The graph's handles are not tied to the thread that created them.
unsafe impl Send for Captured {}

impl CudaBackend {
    /// Captures the launches of a step of `graph` into a CUDA graph (nothing runs yet: the
    /// caller replays it). The batch's inputs are uploaded into the graph's input buffers.
    pub(super) fn capture(
        &self,
        graph: &Graph,
        batch: &StepBatch,
        key_bound: u32,
    ) -> Result<Captured> {
        let s = &self.stream;
        let inputs = StepInputs::upload(s, batch)?;
        let tables = self.upload_tables(graph)?;
        let mut res = Results::empty(graph.nodes.len());
        for &t in &graph.outputs {
            let (i, node) = (t.0 as usize, &graph.nodes[t.0 as usize]);
            if res.vals[i].is_none() {
                res.vals[i] = Some(self.alloc(node.rows * node.cols)?);
            }
            if let Op::TopK { k, .. } = node.op {
                let ids = s.alloc_zeros::<u32>((node.rows * k).max(1));
                res.ids[i] = Some(ids.map_err(err("allocating"))?);
            }
        }
        // Thread-local: other threads' CUDA calls (another backend, a device listing) neither
        // break nor join this capture.
        s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(err("beginning a graph capture"))?;
        let launched = self.launch_nodes(graph, batch, &inputs, &tables, key_bound, &mut res);
        if launched.is_err() {
            // Intermediates allocated inside the capture are freed inside it too: the capture's
            // addresses mean nothing once it is abandoned.
            let outputs: Vec<usize> = graph.outputs.iter().map(|t| t.0 as usize).collect();
            for i in (0..res.vals.len()).filter(|i| !outputs.contains(i)) {
                res.vals[i] = None;
                res.ids[i] = None;
            }
        }
        // The capture is ended whatever happened, so the stream takes direct launches again.
        let ended = s.end_capture(CUgraphInstantiate_flags(0));
        launched?;
        let cuda_graph = ended
            .map_err(err("ending a graph capture"))?
            .ok_or_else(|| BackendError::Unsupported("CUDA: the capture was empty".into()))?;
        Ok(Captured {
            graph: cuda_graph,
            inputs,
            _tables: tables,
            outputs: res,
        })
    }

    /// Launches captured graph `i` with `batch`'s inputs.
    pub(super) fn replay(&mut self, i: usize, batch: &StepBatch) -> Result<()> {
        let s = self.stream.clone();
        let c = self
            .graphs
            .get_mut(i)
            .ok_or_else(|| BackendError::InvalidStep(format!("no captured graph {i}")))?;
        let up = "uploading a step's inputs";
        s.memcpy_htod(batch.tokens, &mut c.inputs.tokens)
            .map_err(err(up))?;
        s.memcpy_htod(batch.positions, &mut c.inputs.positions)
            .map_err(err(up))?;
        s.memcpy_htod(batch.seqs, &mut c.inputs.seqs)
            .map_err(err(up))?;
        c.graph.launch().map_err(err("launching a CUDA graph"))
    }

    /// The output buffers of captured graph `i`.
    pub(super) fn captured_outputs(&mut self, i: usize) -> Result<&Results> {
        self.graphs
            .get_mut(i)
            .map(|c| &c.outputs)
            .ok_or_else(|| BackendError::InvalidStep(format!("no captured graph {i}")))
    }
}
