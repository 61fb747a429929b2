//! Plumbing every backend needs around a recorded [`Graph`], kept once here so each backend
//! (CPU, wgpu, and any extension crate) runs the same checks and gives the same shapes:
//! checking a batch against its graph, how long each node's result must live, and assembling
//! the read-back outputs.

use super::{BackendError, Graph, Op, Readback, Result, StepBatch, TensorId};

impl Graph {
    /// Checks that `batch` has one token, position and sequence slot per graph row.
    pub fn check_batch(&self, batch: &StepBatch) -> Result<()> {
        let n = self.n_tokens;
        if batch.tokens.len() != n || batch.positions.len() != n || batch.seqs.len() != n {
            return Err(BackendError::InvalidStep(format!(
                "the graph has {n} rows but the batch has {} tokens, {} positions, {} sequences",
                batch.tokens.len(),
                batch.positions.len(),
                batch.seqs.len()
            )));
        }
        Ok(())
    }

    /// Per node: the index of the last node that reads its result, its own index when no node
    /// reads it, and `usize::MAX` for graph outputs (they live until read back). A backend can
    /// release or reuse a node's buffer once the node at that index has run.
    pub fn last_uses(&self) -> Vec<usize> {
        let mut last: Vec<usize> = (0..self.nodes.len()).collect();
        for (j, node) in self.nodes.iter().enumerate() {
            for t in node.op.inputs() {
                if let Some(l) = last.get_mut(t.0 as usize) {
                    *l = j;
                }
            }
        }
        for t in &self.outputs {
            if let Some(l) = last.get_mut(t.0 as usize) {
                *l = usize::MAX;
            }
        }
        last
    }

    /// What each marked output reads back as, in the order they were marked.
    pub fn output_shapes(&self) -> Vec<OutputShape> {
        self.outputs.iter().map(|&t| self.output_shape(t)).collect()
    }

    /// What tensor `t` reads back as.
    pub fn output_shape(&self, t: TensorId) -> OutputShape {
        let node = &self.nodes[t.0 as usize];
        match node.op {
            Op::TopK { k, .. } => OutputShape::TopK { rows: node.rows, k },
            _ => OutputShape::F32 {
                rows: node.rows,
                cols: node.cols,
            },
        }
    }
}

/// The form of one read-back output: a matrix, or the ids and values of a top-k.
///
/// Owned and small, so a pending GPU step can keep its outputs' shapes without borrowing the
/// graph it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputShape {
    /// A row-major `rows × cols` f32 matrix.
    F32 { rows: usize, cols: usize },
    /// `k` ids and values per row.
    TopK { rows: usize, k: usize },
}

impl OutputShape {
    /// f32 values this output holds (`rows × cols`, or `rows × k` top-k values).
    pub fn values(&self) -> usize {
        match *self {
            OutputShape::F32 { rows, cols } => rows * cols,
            OutputShape::TopK { rows, k } => rows * k,
        }
    }

    /// u32 ids this output holds (0 unless it is a top-k).
    pub fn ids(&self) -> usize {
        match *self {
            OutputShape::F32 { .. } => 0,
            OutputShape::TopK { rows, k } => rows * k,
        }
    }

    /// The read-back output from its values and (for a top-k) ids.
    pub fn assemble(&self, values: Vec<f32>, ids: Vec<u32>) -> Readback {
        match *self {
            OutputShape::F32 { rows, cols } => Readback::F32 {
                rows,
                cols,
                data: values,
            },
            OutputShape::TopK { rows, k } => Readback::TopK {
                rows,
                k,
                ids,
                values,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Weight;
    use crate::dtype::GgmlType;

    fn w(cols: usize, rows: usize) -> Weight {
        Weight {
            id: 0,
            ty: GgmlType::F32,
            cols,
            rows,
        }
    }

    #[test]
    fn last_uses_follow_readers_and_outputs() {
        let mut g = Graph::new(2);
        let e = g.embed(w(4, 10), 1.0); // 0
        let a = g.scale(e, 2.0); // 1
        let b = g.add(e, a); // 2
        let _unused = g.silu(b); // 3
        let t = g.top_k(b, 3); // 4
        g.output(t);
        assert_eq!(g.last_uses(), vec![2, 2, 4, 3, usize::MAX]);
        assert_eq!(g.output_shapes(), vec![OutputShape::TopK { rows: 2, k: 3 }]);
    }

    #[test]
    fn batch_must_match_the_graph() {
        let g = Graph::new(2);
        let ok = StepBatch {
            tokens: &[1, 2],
            positions: &[0, 1],
            seqs: &[0, 0],
        };
        assert!(g.check_batch(&ok).is_ok());
        let bad = StepBatch { tokens: &[1], ..ok };
        assert!(matches!(
            g.check_batch(&bad),
            Err(BackendError::InvalidStep(_))
        ));
    }

    #[test]
    fn assemble_gives_the_readback_shape() {
        let s = OutputShape::F32 { rows: 1, cols: 2 };
        assert_eq!(s.values(), 2);
        assert_eq!(s.ids(), 0);
        assert_eq!(
            s.assemble(vec![1.0, 2.0], vec![]),
            Readback::F32 {
                rows: 1,
                cols: 2,
                data: vec![1.0, 2.0]
            }
        );
    }
}
