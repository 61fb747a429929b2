//! Reading a step's outputs back: at once (`execute`), or enqueued behind the step into
//! page-locked host buffers and collected later (`submit`), so the host prepares the next step
//! while the GPU runs this one.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaStream, DeviceRepr, PinnedHostSlice, ValidAsZeroBits};
use weft_core::backend::{Graph, OutputShape, Readback, Result};

use super::{err, Results};

/// The graph's outputs, read back now, in the order it marked them.
pub(super) fn read_outputs(
    s: &Arc<CudaStream>,
    graph: &Graph,
    res: &Results,
) -> Result<Vec<Readback>> {
    let mut out = Vec::new();
    for &t in &graph.outputs {
        let shape = graph.output_shape(t);
        let mut vals = match &res.vals[t.0 as usize] {
            Some(b) => s.clone_dtoh(b).map_err(err("reading back"))?,
            None => Vec::new(),
        };
        let idv = match &res.ids[t.0 as usize] {
            Some(b) => s.clone_dtoh(b).map_err(err("reading back"))?,
            None => Vec::new(),
        };
        vals.truncate(shape.values());
        out.push(shape.assemble(vals, idv));
    }
    Ok(out)
}

/// Most buffers of each element type kept for reuse (a step has one or two outputs, and a
/// scheduler keeps a step or two in flight).
const KEEP: usize = 8;

/// Page-locked host buffers, reused across steps: allocating page-locked memory costs far more
/// than a decode step's copy. Shared with the pending steps, which give theirs back.
#[derive(Clone, Default)]
pub(super) struct PinnedPool {
    f32s: Arc<Mutex<Vec<PinnedHostSlice<f32>>>>,
    u32s: Arc<Mutex<Vec<PinnedHostSlice<u32>>>>,
}

/// Index of the smallest of `lens` holding `want` elements.
fn best_fit(lens: &[usize], want: usize) -> Option<usize> {
    (0..lens.len())
        .filter(|&i| lens[i] >= want)
        .min_by_key(|&i| lens[i])
}

/// Index of the buffer to drop when `lens` is over [`KEEP`] (the smallest: large outputs are
/// the costly ones to allocate again).
fn to_drop(lens: &[usize]) -> Option<usize> {
    if lens.len() <= KEEP {
        return None;
    }
    (0..lens.len()).min_by_key(|&i| lens[i])
}

fn take<T: DeviceRepr>(
    free: &Mutex<Vec<PinnedHostSlice<T>>>,
    s: &Arc<CudaStream>,
    len: usize,
) -> Result<PinnedHostSlice<T>> {
    let mut free = free.lock().unwrap_or_else(|e| e.into_inner());
    let lens: Vec<usize> = free.iter().map(|b| b.len()).collect();
    if let Some(i) = best_fit(&lens, len) {
        return Ok(free.swap_remove(i));
    }
    // Plain page-locked memory (flags 0): cudarc's default is write-combined, which the host
    // reads very slowly.
    // SAFETY: the contents are written by the copy enqueued next before anything reads them.
    unsafe { s.context().alloc_pinned_with_flags::<T>(len.max(1), 0) }
        .map_err(err("allocating page-locked memory"))
}

fn give<T>(free: &Mutex<Vec<PinnedHostSlice<T>>>, b: PinnedHostSlice<T>) {
    let mut free = free.lock().unwrap_or_else(|e| e.into_inner());
    free.push(b);
    let lens: Vec<usize> = free.iter().map(|b| b.len()).collect();
    if let Some(i) = to_drop(&lens) {
        free.swap_remove(i);
    }
}

/// One output on its way back: the shape to assemble and the host buffers being filled, with
/// how many elements of each are the output's.
pub(super) struct PendingRead {
    shape: OutputShape,
    vals: Option<(PinnedHostSlice<f32>, usize)>,
    ids: Option<(PinnedHostSlice<u32>, usize)>,
}

/// Enqueues copies of the graph's outputs into page-locked buffers, behind the step's launches.
pub(super) fn enqueue_reads(
    s: &Arc<CudaStream>,
    pool: &PinnedPool,
    graph: &Graph,
    res: &Results,
) -> Result<Vec<PendingRead>> {
    let mut reads = Vec::new();
    for &t in &graph.outputs {
        let shape = graph.output_shape(t);
        let vals = match &res.vals[t.0 as usize] {
            Some(b) => {
                let mut h = take(&pool.f32s, s, b.len())?;
                s.memcpy_dtoh(b, &mut h).map_err(err("reading back"))?;
                Some((h, b.len()))
            }
            None => None,
        };
        let ids = match &res.ids[t.0 as usize] {
            Some(b) => {
                let mut h = take(&pool.u32s, s, b.len())?;
                s.memcpy_dtoh(b, &mut h).map_err(err("reading back"))?;
                Some((h, b.len()))
            }
            None => None,
        };
        reads.push(PendingRead { shape, vals, ids });
    }
    Ok(reads)
}

/// Copies `n` elements out of a filled buffer, waiting for its copy to finish.
fn collect<T: ValidAsZeroBits + Copy>(b: &PinnedHostSlice<T>, n: usize) -> Result<Vec<T>> {
    let v = b.as_slice().map_err(err("waiting for a step"))?;
    Ok(v[..n.min(v.len())].to_vec())
}

/// Waits for the copies and assembles the outputs; the buffers go back to the pool.
pub(super) fn finish_reads(reads: Vec<PendingRead>, pool: &PinnedPool) -> Result<Vec<Readback>> {
    let mut out = Vec::new();
    let mut failed = None;
    for r in reads {
        let mut vals = Vec::new();
        let mut idv = Vec::new();
        if let Some((b, n)) = r.vals {
            match collect(&b, n) {
                Ok(v) => vals = v,
                Err(e) => failed = failed.or(Some(e)),
            }
            give(&pool.f32s, b);
        }
        if let Some((b, n)) = r.ids {
            match collect(&b, n) {
                Ok(v) => idv = v,
                Err(e) => failed = failed.or(Some(e)),
            }
            give(&pool.u32s, b);
        }
        vals.truncate(r.shape.values());
        out.push(r.shape.assemble(vals, idv));
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_by_best_fit() {
        assert_eq!(best_fit(&[], 10), None);
        assert_eq!(best_fit(&[5, 9], 10), None);
        // The smallest that holds the output, not the first.
        assert_eq!(best_fit(&[151_936, 12, 40, 10], 10), Some(3));
        assert_eq!(best_fit(&[151_936, 12, 40], 11), Some(1));
        assert_eq!(best_fit(&[151_936, 12, 40], 41), Some(0));
    }

    #[test]
    fn the_pool_keeps_the_largest() {
        let lens: Vec<usize> = (1..=KEEP).collect();
        assert_eq!(to_drop(&lens), None);
        let mut over = lens.clone();
        over.push(1000);
        assert_eq!(to_drop(&over), Some(0));
    }
}
