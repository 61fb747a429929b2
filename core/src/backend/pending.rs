//! A step whose outputs may not be back yet: what [`Backend::submit`](super::Backend::submit)
//! returns, so the browser build can await GPU readback instead of blocking.

use super::{Graph, Readback, Result};

/// The outputs of a submitted step: already computed (CPU), or on their way back from a GPU.
pub struct PendingStep(Inner);

enum Inner {
    Ready(Vec<Readback>),
    Gpu(super::wgpu::GpuPending),
}

impl PendingStep {
    /// Outputs computed synchronously.
    pub fn ready(out: Vec<Readback>) -> Self {
        PendingStep(Inner::Ready(out))
    }

    /// Outputs being read back from the wgpu backend.
    pub fn gpu(p: super::wgpu::GpuPending) -> Self {
        PendingStep(Inner::Gpu(p))
    }

    /// The outputs, in the order `graph` (the graph the step ran) marked them.
    pub async fn wait(self, graph: &Graph) -> Result<Vec<Readback>> {
        match self.0 {
            Inner::Ready(out) => Ok(out),
            Inner::Gpu(p) => p.wait(graph).await,
        }
    }
}
