//! Reading a submitted step's outputs without blocking the thread.
//!
//! In the browser a WebGPU buffer can only be mapped by returning to the JavaScript event loop,
//! so the wasm build cannot wait the way [`Recorder::finish`](super::record::Recorder::finish)
//! does. [`WgpuBackend::submit_step`] records and submits a step exactly as `execute` does and
//! returns a [`GpuPending`] whose [`wait`](GpuPending::wait) is a future resolved by the map
//! callbacks. Natively the future also works: it polls the device once before awaiting.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use super::record::{self, Submitted};
use super::WgpuBackend;
use crate::backend::{BackendError, Graph, PendingStep, Readback, Result, StepBatch};

/// A submitted step whose outputs are still on their way back from the GPU.
pub struct GpuPending {
    device: wgpu::Device,
    sub: Submitted,
}

impl WgpuBackend {
    /// Records and submits one step (as [`Backend::execute`](crate::backend::Backend::execute))
    /// without waiting for its outputs.
    pub fn submit_step(&mut self, graph: &Graph, batch: &StepBatch) -> Result<GpuPending> {
        let mut rec = self.recorder(graph, batch)?;
        for i in 0..graph.nodes.len() {
            rec.node(graph, i)?;
        }
        let (sub, stats) = rec.submit(graph)?;
        self.stats = stats;
        Ok(GpuPending {
            device: self.gpu.device.clone(),
            sub,
        })
    }
}

impl GpuPending {
    /// The pending step as the backend-neutral [`PendingStep`].
    pub fn into_pending(self) -> PendingStep {
        PendingStep::later(Box::pin(self.wait()))
    }

    /// Waits for the outputs of the submitted step.
    pub async fn wait(self) -> Result<Vec<Readback>> {
        let mut maps = Vec::new();
        for (_, st, bytes, ids) in &self.sub.reads {
            let total = bytes + ids.unwrap_or(0);
            if total > 0 {
                let slot = Arc::new(Mutex::new(MapSlot::default()));
                let s = slot.clone();
                st.slice(..total).map_async(wgpu::MapMode::Read, move |r| {
                    let mut g = s.lock().unwrap_or_else(|e| e.into_inner());
                    g.done = Some(r.is_ok());
                    if let Some(w) = g.waker.take() {
                        w.wake();
                    }
                });
                maps.push(MapWait(slot));
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| BackendError::Unsupported(format!("GPU device lost or stalled: {e}")))?;
        #[cfg(target_arch = "wasm32")]
        let _ = &self.device;
        if let Some(e) = self.sub.scope.pop().await {
            return Err(BackendError::Unsupported(format!(
                "GPU validation error: {e}"
            )));
        }
        for m in maps {
            if !m.await {
                return Err(BackendError::Unsupported(
                    "cannot read GPU results (buffer mapping failed; the device may be lost)"
                        .into(),
                ));
            }
        }
        record::collect_mapped(&self.sub.reads)
    }
}

/// The outcome of one `map_async`, filled by its callback.
#[derive(Default)]
struct MapSlot {
    done: Option<bool>,
    waker: Option<Waker>,
}

/// Resolves to whether the mapping succeeded.
struct MapWait(Arc<Mutex<MapSlot>>);

impl Future for MapWait {
    type Output = bool;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match g.done {
            Some(ok) => Poll::Ready(ok),
            None => {
                g.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
