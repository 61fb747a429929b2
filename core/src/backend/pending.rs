//! A step whose outputs may not be back yet: what [`Backend::submit`](super::Backend::submit)
//! returns, so the browser build can await GPU readback instead of blocking.
//!
//! It holds either the outputs or a boxed future that yields them, so any backend (core's wgpu
//! backend, an extension crate) can return its own kind of wait without core naming it.

use std::future::Future;
use std::pin::Pin;

use super::{Readback, Result};

/// The future a GPU backend hands back from `submit`. Not `Send`: GPU error scopes and browser
/// handles are tied to the thread that submitted, and a step is awaited where it was submitted.
pub type StepFuture = Pin<Box<dyn Future<Output = Result<Vec<Readback>>>>>;

/// The outputs of a submitted step: already computed (CPU), or on their way back from a GPU.
pub struct PendingStep(Inner);

enum Inner {
    Ready(Vec<Readback>),
    Later(StepFuture),
}

impl PendingStep {
    /// Outputs computed synchronously.
    pub fn ready(out: Vec<Readback>) -> Self {
        PendingStep(Inner::Ready(out))
    }

    /// Outputs a backend is still producing; `fut` yields them in the order the graph marked.
    pub fn later(fut: StepFuture) -> Self {
        PendingStep(Inner::Later(fut))
    }

    /// The outputs, in the order the step's graph marked them.
    pub async fn wait(self) -> Result<Vec<Readback>> {
        match self.0 {
            Inner::Ready(out) => Ok(out),
            Inner::Later(f) => f.await,
        }
    }
}
